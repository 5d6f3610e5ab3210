"""`bernstein-tui run`: the engine without the console, with rich progress.

A line per engine event, and (on a terminal) a live table of running tasks
with state, model and elapsed time. Ctrl-C, SIGTERM or SIGHUP stops cleanly: agents are
killed and their tasks go back to open.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from console.engine.engine import Engine
from console.engine.lifecycle import stop_signals_ignored, stop_signals_interrupt
from console.model import EngineEvent, Task, TaskState, state_label
from console.sdd.sanitize import data_text, display_text

LEVEL_MARK = {"info": "·", "warning": "⚠", "error": "✗"}


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
                    engine.stopping.wait()
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
