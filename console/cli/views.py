"""What the commands print: `status` and `gates` without --json, and `run`'s progress.

Every name in it (states, gates, ids, files, reasons, tool output) is data: shown
through the sanitiser as `Text` or with markup off, never as markup.

`run`: a line per engine event, and (on a terminal) a live table of running tasks
with state, model and elapsed time. Ctrl-C, SIGTERM or SIGHUP stops cleanly: agents are
killed and their tasks go back to open.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from console.model import EngineEvent, GateReport, Task, TaskState, gate_label, state_label
from console.sdd.agent_live import agent_line
from console.sdd.sanitize import CELL_LIMIT, data_text, display_text

if TYPE_CHECKING:
    from console.engine.engine import Engine

MAX_PROBLEMS_SHOWN = 40
LEVEL_MARK = {"info": "·", "warning": "⚠", "error": "✗"}


# -- status ----------------------------------------------------------------------

def print_status(summary: dict[str, Any], where: str, console: Console | None = None) -> None:
    out = console or Console()
    tasks = summary["tasks"]
    out.print(data_text(f"Tasks in {where}: {tasks['total']}", "bold"))
    table = Table()
    table.add_column("state")
    table.add_column("count", justify="right")
    for status, count in tasks["by_state"].items():
        table.add_row(data_text(state_label(status), limit=CELL_LIMIT), str(count))
    out.print(table)

    gates = summary["gates"]["by_gate"]
    if gates:
        statuses = sorted({s for counts in gates.values() for s in counts})
        out.print(Text("Quality gates (runs per status)", style="bold"))
        gate_table = Table()
        gate_table.add_column("gate")
        for status in statuses:
            gate_table.add_column(data_text(status, limit=CELL_LIMIT), justify="right")
        for gate, counts in gates.items():
            gate_table.add_row(data_text(gate, limit=CELL_LIMIT),
                               *(str(counts.get(s, 0)) for s in statuses))
        out.print(gate_table)

    chains, sla, props = summary["chains"], summary["sla"], summary["proposals"]
    out.print(
        f"chains {chains['total']} (escalated {chains['escalated']})  ·  "
        f"reflections {summary['reflections']['total']}  ·  reviews {summary['reviews']['total']}"
        f"  ·  archive {summary['archive']['total']}  ·  backlog open {summary['backlog']['open']}"
    )
    out.print(f"SLA: ⚠ warning {sla['warning']}  ✗ violated {sla['violated']}  ✓ met {sla['met']}")
    pending = display_text(", ".join(props["pending_ids"]) or "none")
    out.print(f"proposals pending a human decision: {props['pending']} ({pending})",
              markup=False, highlight=False)

    for mission in summary.get("missions", []):
        gates = ", ".join(f"{g['name']} {g['status']}" for g in mission["gates"]) or "no gates"
        out.print(display_text(f"mission {mission['id']}: {mission['state']}, "
                               f"{mission['done']}/{mission['total']} done · gates: {gates}"),
                  markup=False, highlight=False)

    agents = summary.get("agents") or []
    out.print(f"agents running: {len(agents)}")
    for item in agents:
        out.print(display_text(f"  {agent_line(item)}"), markup=False, highlight=False)

    problems = summary["problems"]
    if not problems:
        out.print("problems: none")
        return
    out.print(f"[bold]problems: {len(problems)} record(s) could not be read[/bold]")
    for item in problems[:MAX_PROBLEMS_SHOWN]:
        where_at = item["file"] if item["line"] is None else f"{item['file']}:{item['line']}"
        out.print(display_text(f"  {where_at}: {item['reason']}"), markup=False,
                  highlight=False)
    if len(problems) > MAX_PROBLEMS_SHOWN:
        out.print(f"  … and {len(problems) - MAX_PROBLEMS_SHOWN} more (see status --json)")


# -- gates ----------------------------------------------------------------------



def print_report(report: GateReport, console: Console | None = None) -> None:
    out = console or Console()
    table = Table(title_justify="left")
    for column in ("gate", "status", "required", "cached", "ms", "details"):
        table.add_column(column, justify="right" if column == "ms" else "left")
    for result in report.results:
        style = "bold" if result.blocked or (result.required and result.status == "skipped") \
            else ""
        table.add_row(data_text(result.name), data_text(gate_label(result.status), style),
                      "yes" if result.required else "no", "yes" if result.cached else "",
                      str(result.duration_ms), data_text(result.details, multiline=True))
    out.print(table)
    for result in report.results:
        if result.digest:
            out.print(data_text(f"── {result.name}", "bold"))
            out.print(data_text(result.digest, multiline=True))
    ran = sorted({str(r.metadata["ran_with"]) for r in report.results
                  if r.metadata.get("ran_with")})
    if ran:  # which interpreter ran the tools: the project's .venv, uv, or PATH
        out.print(data_text("tools ran with: " + " | ".join(ran)))
    verdict = "PASS: no required gate blocks" if report.overall_pass else \
        "BLOCKED by " + ", ".join(r.name for r in report.results if r.blocked)
    out.print(data_text(f"{verdict}  ·  {len(report.changed_files)} changed file(s)  ·  "
                        f"{report.cache_hits} cached  ·  {report.total_duration_ms} ms", "bold"))



# -- proposals -------------------------------------------------------------------

def print_proposals(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """`proposals` without --json: one row per proposal, pending and decided."""
    table = Table(title_justify="left")
    # the id is what `approve`/`reject` take: never wrapped or cut, whatever the width
    table.add_column("id", no_wrap=True, overflow="ignore", min_width=8)
    for column in ("state", "risk", "conf.", "title", "last decision"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(data_text(row["proposal_id"], limit=CELL_LIMIT),
                      "! pending" if row["pending"] else "✓ decided",
                      data_text(row["risk_level"] or "", limit=CELL_LIMIT),
                      f"{row['confidence'] or 0:.2f}", data_text(row["title"], limit=CELL_LIMIT),
                      data_text(f"{row['outcome']} {row['reviewer'] or ''}", limit=CELL_LIMIT))
    (console or Console()).print(table)

# -- run ----------------------------------------------------------------------

def _running_table(tasks: list[Task]) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for column in ("task", "state", "model", "elapsed", "title"):
        table.add_column(column)
    now = time.time()
    for task in tasks:
        if task.state not in (TaskState.CLAIMED, TaskState.IN_PROGRESS):
            continue
        elapsed = now - (task.claimed_at or now)
        # data: never markup (a `[/]` in a title ended the live view)
        table.add_row(data_text(task.id, limit=40), data_text(state_label(task.status)),
                      data_text(task.metadata.get("last_model") or task.model or "—"),
                      f"{elapsed:5.1f}s", data_text(task.title, limit=60))
    return table


def _counts_line(engine: Engine, tasks: list[Task]) -> Text:
    counts = Counter(t.status for t in tasks)
    parts = [f"{state_label(s.value)} {counts[s.value]}" for s in TaskState if counts[s.value]]
    paused = "  [paused]" if engine.paused else ""
    return data_text(f"{sum(counts.values())} tasks  " + "  ".join(parts) + paused)


class _LiveView:
    """What the live view draws. Rich calls it holding the Live's lock, and the engine
    prints its events (through that lock) while it holds the store's: so it never
    waits for the store — a busy store shows the last view again, not a deadlock."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.last: Group = Group()

    def __call__(self) -> Group:
        lock = self.engine.store.lock
        if lock.acquire(blocking=False):
            try:
                tasks = self.engine.store.snapshot()
            finally:
                lock.release()
            self.last = Group(_counts_line(self.engine, tasks), _running_table(tasks))
        return self.last


def run_headless(root: Path, *, workers: int | None, until_idle: bool,
                 console: Console | None = None) -> tuple[Engine, bool]:
    """Run until idle (or forever); returns the engine and whether it was interrupted."""
    out = console or Console()

    def echo(event: EngineEvent) -> None:
        mark = LEVEL_MARK.get(event.level, "·")
        where = f" [{event.file}]" if event.file else ""
        with contextlib.suppress(OSError):  # a terminal that hung up must not stop a stop
            out.print(display_text(f"{time.strftime('%H:%M:%S')} {mark} {event.message}"
                                   f"{where}"),
                      markup=False, highlight=False, soft_wrap=True)

    from console.engine.engine import Engine
    from console.engine.lifecycle import (
        stop_signals_ignored,
        stop_signals_interrupt,
        wait_for_stop,
    )

    engine = Engine(root, workers=workers, echo=echo)
    engine.start()
    interrupted = False
    with stop_signals_interrupt():  # SIGHUP (terminal gone) and SIGTERM: like Ctrl-C
        try:
            live = (Live(get_renderable=_LiveView(engine), console=out,
                         refresh_per_second=4, transient=True)
                    if out.is_terminal else None)
            try:
                if live is not None:
                    live.start()
                if until_idle:
                    engine.run_until_idle()
                else:
                    wait_for_stop(engine.stopping)
            finally:
                if live is not None:
                    with contextlib.suppress(OSError):  # a terminal that hung up
                        live.stop()
        except KeyboardInterrupt:
            interrupted = True
            with contextlib.suppress(OSError):
                out.print("stopping: killing running agents and reopening their tasks …")
        finally:
            with stop_signals_ignored():  # a second signal must not leave agents running
                engine.stop()
    with contextlib.suppress(OSError):
        out.print(_counts_line(engine, engine.store.snapshot()), highlight=False)
    return engine, interrupted
