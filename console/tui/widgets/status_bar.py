"""The header: where we are and tasks per state (glyph and word) on one line;
the engine (workers busy/total, paused), cost so far, pending proposals and
problems on the next."""

from __future__ import annotations

from textual.widgets import Static

from console.model import TaskState, state_label
from console.tui.updates import Header


def counts_text(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    known = [s.value for s in TaskState if counts.get(s.value)]
    unknown = sorted(k for k in counts if k not in known)
    parts = [f"{state_label(state)} {counts[state]}" for state in known + unknown]
    return f"{total} tasks" + ("  ·  " + "  ".join(parts) if parts else "")


def engine_text(header: Header, fallback: str) -> str:
    engine = header.engine
    if engine is None or not engine.running:
        return fallback
    paused = "  ⏸ PAUSED (z resumes)" if engine.paused else ""
    return (f"engine pid {engine.pid}: {engine.busy}/{engine.workers} workers busy"
            f"{paused}" + (f" · base {engine.base}" if engine.base else ""))


def summary_text(where: str, header: Header, engine_line: str) -> str:
    line2 = [engine_text(header, engine_line), f"cost ${header.cost_usd:.4f}"]
    if header.pending_proposals:
        line2.append(f"! {header.pending_proposals} proposal"
                     f"{'s' if header.pending_proposals != 1 else ''} pending (P)")
    if header.problems:
        line2.append(f"⚠ {header.problems} problem{'s' if header.problems != 1 else ''} (p)")
    return f"{where}  ·  {counts_text(header.counts)}\n" + "  ·  ".join(line2)


class StatusBar(Static):
    """Re-rendered from the header figures each batch carries."""

    def __init__(self, where: str, **kwargs: object) -> None:
        super().__init__(where, markup=False, **kwargs)  # type: ignore[arg-type]
        self.where = where
        self.engine_line = "engine: off (watching only)"
        self.header = Header({}, 0, None, 0.0, 0)

    def show(self, header: Header | None = None, engine_line: str | None = None) -> None:
        if header is not None:
            self.header = header
        if engine_line is not None:
            self.engine_line = engine_line
        self.update(summary_text(self.where, self.header, self.engine_line))
        self.set_class(self.header.problems > 0, "-problems")
        self.set_class(bool(self.header.engine and self.header.engine.paused), "-paused")
