"""Server-sent events: the frame parser, and a stream that reconnects with backoff.

Bernstein's `/events` sends `event: <type>` + `data: <json>` frames and a
heartbeat every 15 s; it drops events for a slow reader and never replays. So
the stream tells its owner about every (re)connection (`on_connect`: re-sync
now) and every gap (`on_gap`), and the owner re-reads the server's state.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from console.remote.bounded import LimitExceeded, size_text
from console.remote.client import ServerClient, ServerError, StreamLines
from console.remote.limits import MAX_EVENT_LINE_BYTES

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data as JSON; None when it is not JSON."""
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def parse_events(lines: Iterable[str], max_bytes: int = MAX_EVENT_LINE_BYTES
                 ) -> Iterator[SseEvent]:
    """Frames from lines (line endings already stripped), per the SSE spec: `:` starts a
    comment, `field: value` (one optional space), data lines join with a newline, a blank
    line ends the frame; a frame without data is no event; an unfinished frame is dropped.
    An event whose data grows past `max_bytes` raises LimitExceeded."""
    data: list[str] = []
    event, last_id, size = "", None, 0
    for line in lines:
        if not line:
            if data:
                yield SseEvent(event or "message", "\n".join(data), last_id)
            event, data, size = "", [], 0
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            size += len(value) + 1
            if size > max_bytes:
                raise LimitExceeded(f"an event's data longer than {size_text(max_bytes)}")
            data.append(value)
        elif name == "id" and "\0" not in value:
            last_id = value
        # retry: and unknown fields are ignored


class EventStream:
    """Follows one SSE path until `stop` is set, reconnecting after every drop.

    Backoff doubles from `first_s` to `max_s` (with jitter) while connects keep
    failing, starts over after a connection that delivered a frame, and waits at
    least what a 429's Retry-After asks.
    """

    def __init__(self, client: ServerClient, stop: threading.Event, *,
                 on_event: Callable[[SseEvent], None],
                 on_connect: Callable[[], None],
                 on_gap: Callable[[str], None],
                 path: str = "/events",
                 first_s: float = BACKOFF_FIRST_S, max_s: float = BACKOFF_MAX_S) -> None:
        self.client = client
        self.stop = stop
        self.on_event = on_event
        self.on_connect = on_connect
        self.on_gap = on_gap
        self.path = path
        self.first_s = first_s
        self.max_s = max_s
        self.connects = 0
        self._lines: StreamLines | None = None

    def run(self) -> None:
        delay = self.first_s
        while not self.stop.is_set():
            wait_at_least = 0.0
            got_frame = False
            try:
                with self.client.stream(self.path) as lines:
                    self._lines = lines
                    self.connects += 1
                    self.on_connect()
                    for event in parse_events(_until(iter(lines), self.stop)):
                        got_frame = True
                        self.on_event(event)
                if self.stop.is_set():
                    return
                reason = f"{self.client.where(self.path)}: the server closed the stream"
            except ServerError as exc:
                reason = str(exc)
                wait_at_least = exc.retry_after or 0.0
            except LimitExceeded as exc:
                reason = f"{self.client.where(self.path)}: {exc}; the stream is reset"
            finally:
                self._lines = None
            if self.stop.is_set():
                return
            if got_frame:
                delay = self.first_s
            self.on_gap(reason)
            pause = max(wait_at_least, delay * random.uniform(0.8, 1.2))
            delay = min(self.max_s, delay * 2)
            self.stop.wait(pause)


    def abort(self) -> None:
        """End the current connection's blocked read (call after setting `stop`)."""
        lines = self._lines
        if lines is not None:
            lines.abort()


def _until(lines: Iterator[str], stop: threading.Event) -> Iterator[str]:
    for line in lines:
        if stop.is_set():
            return
        yield line
