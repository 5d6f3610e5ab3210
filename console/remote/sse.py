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
from console.remote.limits import MAX_EVENT_LINE_BYTES, MAX_EVENT_SKIP_BYTES

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


@dataclass(frozen=True, slots=True)
class SseProblem:
    """An event dropped, and why (one line); the stream reads on."""

    reason: str


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def parse_events(lines: Iterable[str], max_bytes: int = MAX_EVENT_LINE_BYTES,
                 max_frame: int = MAX_EVENT_SKIP_BYTES) -> Iterator[SseEvent | SseProblem]:
    """Frames from lines (line endings already stripped), per the SSE spec: `:` starts a
    comment, `field: value` (one optional space), data lines join with a newline, a blank
    line ends the frame; a frame without data is no event; an unfinished frame is dropped.

    A bad frame is one problem and no event, and the frames around it are read as if it
    were not there: a line over `max_bytes`, or data that grows past `max_bytes`, drops
    its frame (what it holds is not kept, only counted). A frame that goes on past
    `max_frame` bytes raises LimitExceeded: the stream is reset. (Sizes are of the text
    as read, in UTF-8: a byte that was not UTF-8 counts as the 3 of its U+FFFD.)"""
    data: list[str] = []
    event, last_id, size, frame, bad = "", None, 0, 0, False
    for line in lines:
        if not line:
            if data and not bad:
                yield SseEvent(event or "message", "\n".join(data), last_id)
            event, data, size, frame, bad = "", [], 0, 0, False
            continue
        length = _utf8_size(line)
        frame += length + 1
        if frame > max_frame:
            raise LimitExceeded(f"an event longer than {size_text(max_frame)}")
        if length > max_bytes:
            if not bad:
                yield SseProblem(f"an event-stream line longer than {size_text(max_bytes)}: "
                                 "the event it is in is dropped")
            event, data, size, bad = "", [], 0, True
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "id":
            if "\0" not in value:  # (the last id holds whether or not the event is kept)
                last_id = value
        elif bad:
            continue
        elif name == "event":
            event = value
        elif name == "data":
            size += _utf8_size(value) + 1
            if size > max_bytes:
                yield SseProblem(f"an event's data longer than {size_text(max_bytes)}: "
                                 "the event is dropped")
                event, data, size, bad = "", [], 0, True
                continue
            data.append(value)
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
                 on_problem: Callable[[str], None] = lambda reason: None,
                 path: str = "/events",
                 first_s: float = BACKOFF_FIRST_S, max_s: float = BACKOFF_MAX_S) -> None:
        self.client = client
        self.stop = stop
        self.on_event = on_event
        self.on_connect = on_connect
        self.on_gap = on_gap
        self.on_problem = on_problem  # an event dropped (one line); the stream reads on
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
                    for item in parse_events(_until(iter(lines), self.stop)):
                        got_frame = True
                        if isinstance(item, SseProblem):
                            self.on_problem(f"{self.client.where(self.path)}: {item.reason}")
                        else:
                            self.on_event(item)
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
