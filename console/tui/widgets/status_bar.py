"""The header line: where we are, tasks per state (glyph and word), problems."""

from __future__ import annotations

from textual.widgets import Static

from console.model import TaskState, state_label


def summary_text(where: str, counts: dict[str, int], problems: int) -> str:
    total = sum(counts.values())
    known = [s.value for s in TaskState if counts.get(s.value)]
    unknown = sorted(k for k in counts if k not in known)
    parts = [f"{state_label(state)} {counts[state]}" for state in known + unknown]
    text = f"{where}  ·  {total} tasks"
    if parts:
        text += "  ·  " + "  ".join(parts)
    if problems:
        text += f"  ·  ⚠ {problems} problem{'s' if problems != 1 else ''} (p)"
    return text


class StatusBar(Static):
    """Counts per state; re-rendered from the counts each delta carries."""

    def __init__(self, where: str, **kwargs: object) -> None:
        super().__init__(where, markup=False, **kwargs)  # type: ignore[arg-type]
        self.where = where

    def show(self, counts: dict[str, int], problems: int) -> None:
        self.update(summary_text(self.where, counts, problems))
        self.set_class(problems > 0, "-problems")
