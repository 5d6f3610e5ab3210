"""Typed messages the watcher thread posts to the app (the only way state reaches the UI)."""

from __future__ import annotations

from textual.message import Message

from console.model import EngineEvent
from console.sdd.state import Delta


class StateChanged(Message):
    """A batch of file changes, already applied to the State by the watcher thread."""

    def __init__(self, delta: Delta, counts: dict[str, int], problems: int,
                 exists: bool, loaded: bool, events: list[EngineEvent]) -> None:
        super().__init__()
        self.loaded = loaded
        self.events = events
        self.delta = delta
        self.counts = counts
        self.problems = problems
        self.exists = exists


class SourceError(Message):
    """The watcher hit something it could not read; shown as a notification."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class EngineStatus(Message):
    """The embedded engine started, or could not (and why)."""

    def __init__(self, text: str, running: bool) -> None:
        super().__init__()
        self.text = text
        self.running = running
