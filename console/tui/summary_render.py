"""The Summary tab: why a task is where it is, as a Rich renderable built from the State.

Description, state and its reason, the dependencies and dependants with their states,
progress, timestamps and the worktree/branch. A pure function of the data (no I/O),
the same for a local project and a `--server` one (both build the same `Task`).
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.model import Task, TaskState, state_label
from console.sdd.sanitize import data_text, display_text
from console.sdd.state import State
from console.sdd.task_live import STALE_AFTER_S, TaskLive
from console.tui.keys import BLOCKER_KEY

#: how many dependants are listed before "… and N more"
MAX_DEPENDANTS = 20


def _when(value: object) -> str:
    """An epoch as UTC (the same on every machine, as the records and a server's are)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(value)))  # type: ignore[arg-type]  # any JSON value, caught
    except (TypeError, ValueError, OverflowError, OSError):
        return display_text(value, limit=40)


def blocking_dependency(state: State, task: Task) -> str | None:
    """The dependency holding `task` back: the one a blocked_by_* record names
    (`metadata.blocking_task_id`, as Bernstein 3.23.0 and our engine write it, while
    the task is still blocked), else the first dependency that is not done."""
    named = task.metadata.get("blocking_task_id")
    if isinstance(named, str) and named and task.status.startswith("blocked"):
        return named  # a stale one on a task unblocked since is not believed
    for dep_id in task.depends_on:
        dep = state.tasks.get(dep_id)
        if dep is None or dep.state is not TaskState.DONE:
            return dep_id
    return None


def _reason_lines(task: Task, blocker: str | None) -> list[Text]:
    lines: list[Text] = []
    if task.result_summary:
        lines.append(Text("Reason: ", style="bold") + data_text(task.result_summary,
                                                                multiline=True))
    for key, label in (("blocked_reason", "Blocked"), ("held_by", "Held by gate")):
        value = task.metadata.get(key) or task.extra.get(key)
        if value:
            lines.append(Text(f"{label}: ", style="bold") + data_text(value, multiline=True))
    if task.terminal_reason:
        lines.append(Text("Terminal reason: ", style="bold") + data_text(task.terminal_reason))
    if blocker and task.status.startswith("blocked"):
        lines.append(Text("Waiting on dependency ", style="bold") + data_text(blocker)
                     + Text(f" ({BLOCKER_KEY} jumps to it)", style="italic"))
    return lines


def _task_rows(state: State, title: str, ids: list[str], blocker: str | None) -> Table:
    table = Table(box=None, expand=True, title=title, title_justify="left",
                  title_style="bold")
    for column in ("id", "state", "title"):
        table.add_column(column, overflow="fold")
    for task_id in ids:
        other = state.tasks.get(task_id)
        mark = " ◀ blocking" if task_id == blocker else ""
        shown = state_label(other.status) if other else "? not known here"
        table.add_row(data_text(task_id), data_text(shown + mark),
                      data_text(other.title if other else "", limit=80))
    return table


def _progress(task: Task, live: TaskLive | None) -> Text | None:
    log: Any = list(live.progress) if live and live.progress else task.extra.get("progress_log")
    if not isinstance(log, list) or not log or not isinstance(log[-1], dict):
        return None
    last = log[-1]
    percent = last.get("percent")
    head = f"{display_text(percent, limit=6)}% · " if percent not in (None, "") else ""
    stamp = f" ({_when(last['timestamp'])})" if last.get("timestamp") else ""
    return (Text("Progress: ", style="bold") + data_text(f"{head}{last.get('message', '')}")
            + Text(stamp))


def _heartbeat(live: TaskLive | None, now: float) -> Text | None:
    beat = live.heartbeat if live else None
    if not beat:
        return None
    parts: list[Text] = []
    stamp = beat.get("timestamp")
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
        age = max(0.0, now - float(stamp))
        parts.append(Text(f"{age:.0f} s ago"))
        if age > STALE_AFTER_S:
            parts.append(Text("stale: the agent may be hung", style="bold"))
    parts += [Text(f"{key} ") + data_text(beat[key], limit=60) for key in
              ("status", "phase", "message") if beat.get(key) not in (None, "")]
    return Text("Last heartbeat: ", style="bold") + Text(" · ").join(parts)


def summary_view(state: State, task: Task, live: TaskLive | None = None,
                 now: float | None = None) -> RenderableType:
    """`live` is what a worker read of the task's progress and heartbeat (None until
    then); `now` for the heartbeat's age (the wall clock unless given)."""
    blocker = blocking_dependency(state, task)
    parts: list[RenderableType] = [
        data_text(task.title, "bold", multiline=True),
        Text("State: ", style="bold") + data_text(state_label(task.status)),
        *_reason_lines(task, blocker),
    ]
    beat = None if task.is_terminal else _heartbeat(live, time.time() if now is None else now)
    for line in (_progress(task, live), beat):
        if line is not None:
            parts.append(line)
    if live is not None and live.problem:
        parts.append(Text("Not shown: ", style="bold") + data_text(live.problem))
    stamps = [f"{label} {_when(value)}" for label, value in (
        ("created", task.created_at), ("claimed", task.claimed_at),
        ("completed", task.completed_at)) if value]
    if stamps:
        parts.append(Text(" · ".join(stamps)))
    branch, session = task.metadata.get("branch"), task.metadata.get("session")
    if branch or session:
        where = " · ".join(f"{k} {display_text(v, limit=120)}" for k, v in (
            ("branch", branch), ("worktree", f".sdd/worktrees/{session}" if session else ""))
            if v)
        parts.append(Text(where))
    parts.append(Text("\nDescription", style="bold"))
    parts.append(data_text(task.description or "(none)", multiline=True, limit=20_000))
    if task.depends_on:
        parts.append(Text(""))
        parts.append(_task_rows(state, "Depends on", list(task.depends_on), blocker))
    dependants = sorted(t.id for t in state.tasks.values() if task.id in t.depends_on)
    if dependants:
        parts.append(Text(""))
        parts.append(_task_rows(state, "Needed by", dependants[:MAX_DEPENDANTS], None))
        if len(dependants) > MAX_DEPENDANTS:
            parts.append(Text(f"… and {len(dependants) - MAX_DEPENDANTS} more"))
    return Group(*parts)
