"""The engine's voice: runtime/engine_events.jsonl, which the console shows as notices."""

from __future__ import annotations

import time
from collections.abc import Callable

from console.model import EngineEvent
from console.sdd.fileio import append_jsonl
from console.sdd.metric_codec import encode_engine_event
from console.sdd.paths import Kind, SddPaths


class EventLog:
    def __init__(self, paths: SddPaths, *, echo: Callable[[EngineEvent], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 on_write_error: Callable[[OSError, str], object] | None = None) -> None:
        self.path = paths.of(Kind.ENGINE_EVENTS)
        self.display = paths.display(self.path)
        self.echo = echo
        self.clock = clock
        self.on_write_error = on_write_error

    def emit(self, level: str, message: str, *, task_id: str | None = None,
             file: str | None = None) -> EngineEvent:
        """Append the event and echo it; an event that cannot be written (a full disk)
        is still echoed, and the failure goes to `on_write_error` instead of raising."""
        event = EngineEvent(level, message, self.clock(), task_id, file)
        try:
            append_jsonl(self.path, [encode_engine_event(event)], fsync=False)
        except OSError as exc:
            if self.on_write_error is None:
                raise
            self.on_write_error(exc, self.display)
        if self.echo is not None:
            self.echo(event)
        return event

    def info(self, message: str, **where: str | None) -> EngineEvent:
        return self.emit("info", message, **where)

    def warning(self, message: str, **where: str | None) -> EngineEvent:
        return self.emit("warning", message, **where)

    def error(self, message: str, **where: str | None) -> EngineEvent:
        return self.emit("error", message, **where)
