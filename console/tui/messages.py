"""Typed messages the watcher thread posts to the app (the only way state reaches the UI)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message

from console.control import Outcome
from console.model import EngineEvent
from console.tui.task_rows import TaskRow
from console.tui.updates import Alert, Header


class StateChanged(Message):
    """A batch of file changes, already applied to the State by the watcher thread."""

    def __init__(self, rows: dict[str, TaskRow | None], sections: set[str], header: Header,
                 exists: bool, loaded: bool, events: list[EngineEvent],
                 alerts: list[Alert]) -> None:
        super().__init__()
        self.rows = rows
        self.sections = sections
        self.header = header
        self.exists = exists
        self.loaded = loaded
        self.events = events
        self.alerts = alerts


class SourceError(Message):
    """The watcher hit something it could not read; shown as a notification."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class EngineStatus(Message):
    """The embedded engine started, or could not (and why; `untrusted`: the header's
    line saying the project is untrusted and how to trust it). `status_live`: False when
    `engine_status.json`'s "running" is stale (nobody holds the project); `running` False
    with a live status: an engine this console did not start runs the project."""

    def __init__(self, text: str, running: bool, untrusted: str = "", *,
                 status_live: bool = True) -> None:
        super().__init__()
        self.text = text
        self.running = running
        self.untrusted = untrusted
        self.status_live = status_live


class EngineAlert(Message):
    """What stops the embedded engine right now (e.g. a full disk), or "" once it is over."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class OperatorRequest(Message):
    """A screen asks for an operator action (retry, approve, …): the app runs `call` with
    a Control in an "actions" worker thread and shows its outcome. `name` says which
    action, in the outcome's notification and in a failure's."""

    def __init__(self, name: str, call: Callable[[Any], Outcome]) -> None:
        super().__init__()
        self.name = name
        self.call = call


class ActionDone(Message):
    """An operator action's real outcome (done, or refused and why), from its worker."""

    def __init__(self, name: str, outcome: Outcome) -> None:
        super().__init__()
        self.name = name
        self.outcome = outcome


class Noted(Message):
    """The console showed a notification (already display text): for whoever keeps a
    history of them, and for tests, through the public message hook."""

    def __init__(self, text: str, severity: str) -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class ShowTask(Message):
    """A screen asks for a task on the main screen (Enter on a chain): the app goes back
    to it and selects the task."""

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
