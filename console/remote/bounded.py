"""Reading a server's answer within limits: a total deadline, a body cap, a line cap.

httpx has per-operation timeouts only: a server that sends one byte a second
never trips a read timeout. `Deadline` is the whole request's time: it learns
the request's socket through httpcore's `trace` extension as the connection is
made, and a timer shuts that socket when the time is up, so no read — of the
headers or of the body — outlives it. (The client opens a connection per
request, so every request's socket is learnt this way.)
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import suppress
from typing import Any

import httpx

_SOCKET_EVENTS = ("connection.connect_tcp.complete", "connection.start_tls.complete")


class LimitExceeded(Exception):
    """An answer past a limit; `str()` says which, without the URL (the caller adds it)."""


def shut(sock: socket.socket) -> None:
    """End every blocked read and write on `sock` now, from any thread (closing it from
    another thread would not wake them). The plain socket's shutdown, also for TLS: the
    TLS socket's own would drop its state under a reader still inside it."""
    with suppress(OSError):  # already closed
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class Deadline:
    """One request's total time, enforced by shutting its socket when it runs out."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def cancel(self) -> None:
        """The request is over (or its answer is a stream with limits of its own)."""
        self._timer.cancel()
        with self._lock:
            self._sockets.clear()

    def remaining(self) -> float:
        return max(0.001, self.ends - time.monotonic())

    def timeouts(self, connect_s: float) -> httpx.Timeout:
        """httpx's per-operation timeouts, none longer than what is left."""
        left = self.remaining()
        return httpx.Timeout(left, connect=min(left, connect_s))

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: keeps the socket of each connection the request makes."""
        if event not in _SOCKET_EVENTS:
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                shut(sock)

    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.ends


def read_body(response: httpx.Response, cap: int, deadline: Deadline, *,
              truncate: bool = False) -> bytes:
    """The body, at most `cap` bytes: LimitExceeded past it (the Content-Length is checked
    before a byte is read), or with `truncate` its first `cap` bytes (the rest unread)."""
    declared = response.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > cap:
        raise LimitExceeded(f"answer of {int(declared)} bytes refused: over the limit "
                            f"({size_text(cap)})")
    parts: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        if size + len(chunk) > cap:
            if truncate:
                parts.append(chunk[:cap - size])
                break
            raise LimitExceeded(f"answer refused after {size + len(chunk)} bytes: over the "
                                f"limit ({size_text(cap)})")
        size += len(chunk)
        parts.append(chunk)
        if deadline.passed():
            raise LimitExceeded(f"no complete answer within {deadline.seconds:g} s")
    return b"".join(parts)


def size_text(n: int) -> str:
    """A limit in bytes as an operator reads it: "32 MB", "65536 bytes"."""
    return f"{n / 2**20:g} MB" if n >= 2**20 else f"{n} bytes"


_BREAK = re.compile(rb"\r\n|\r|\n")


def bounded_lines(chunks: Iterable[bytes], cap: int, line_s: float) -> Iterator[str]:
    """Lines from a byte stream (SSE line ends: CRLF, LF or CR), each at most `cap` bytes
    and each finished within `line_s` of the previous one; LimitExceeded otherwise. Only
    the unfinished line is held, so memory stays under `cap` whatever the server sends."""
    buffer = bytearray()
    scanned = 0  # the buffer before this index holds no line end
    last_line = time.monotonic()
    for chunk in chunks:
        buffer += chunk
        start = 0
        while True:
            found = _BREAK.search(buffer, max(start, scanned))
            if found is None or (found.group() == b"\r" and found.end() == len(buffer)):
                break  # a CR at the end may be the first half of CRLF
            if found.start() - start > cap:  # whole in one chunk: refused all the same
                raise LimitExceeded(f"an event-stream line longer than {size_text(cap)}")
            yield buffer[start:found.start()].decode("utf-8", "replace")
            start = found.end()
            last_line = time.monotonic()
        del buffer[:start]
        scanned = max(0, len(buffer) - 1)
        if len(buffer) - buffer.endswith(b"\r") > cap:  # (a CR held for its LF is no byte of it)
            raise LimitExceeded(f"an event-stream line longer than {size_text(cap)}")
        if buffer and time.monotonic() - last_line > line_s:
            raise LimitExceeded(f"an event-stream line unfinished after {line_s:g} s")
    if buffer.endswith(b"\r"):  # the stream ended: that CR ended its line
        yield buffer[:-1].decode("utf-8", "replace")
