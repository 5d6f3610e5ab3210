"""Every limit the task-server client holds a server to, in one place (README "Limits").

A server's answers are data from someone else: a broken or hostile server must
not hold the console, or `status`, waiting forever or make it grow without
bound. Two of the limits can be changed per run through the environment (a
slow link may need a longer deadline; an unusually large server a bigger body).
"""

from __future__ import annotations

import os

#: seconds for a whole ordinary request: connect + headers + the complete body
REQUEST_DEADLINE_S = 10.0
DEADLINE_ENV = "BERNSTEIN_TUI_HTTP_DEADLINE_S"
#: seconds for the TCP (and TLS) connect, within the deadline
CONNECT_S = 5.0
#: bytes of one answer's body; a bigger one is refused (Content-Length first, then counted)
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_BODY_ENV = "BERNSTEIN_TUI_HTTP_MAX_BODY_MB"
#: bytes of an error answer read for its one-line detail (the rest is not read)
MAX_ERROR_BODY_BYTES = 64 * 1024
#: seconds a 429's or 503's Retry-After may ask the client to wait
MAX_RETRY_AFTER_S = 300.0
#: GET /tasks page size (the server's own cap for `limit`)
PAGE = 500
#: tasks read beyond what /tasks/counts reported (tasks created while paging)
PAGING_MARGIN = PAGE
#: tasks read in one full sync whatever the server says; bytes of all its pages together
MAX_REMOTE_TASKS = 100_000
MAX_SYNC_BYTES = 4 * MAX_BODY_BYTES
#: the /events stream: the server sends a heartbeat every 15 s, so 45 s of silence is a
#: gap, and a line still unfinished after that long is no line
STREAM_READ_S = 45.0
#: bytes of one event-stream line, and of one event's data; past it the event is dropped
#: (one problem line) and the stream read on …
MAX_EVENT_LINE_BYTES = 1024 * 1024
#: … up to this many bytes of one line, or of one event: past it the stream is reset
MAX_EVENT_SKIP_BYTES = 16 * MAX_EVENT_LINE_BYTES


def _positive(env: str, default: float, scale: float = 1.0) -> float:
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default * scale
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{env}={raw}: expected a positive number")
    return value * scale


def request_deadline_s() -> float:
    """REQUEST_DEADLINE_S, or the environment's; ValueError names a bad value."""
    return _positive(DEADLINE_ENV, REQUEST_DEADLINE_S)


def max_body_bytes() -> int:
    """MAX_BODY_BYTES, or the environment's (in MB); ValueError names a bad value."""
    return int(_positive(MAX_BODY_ENV, MAX_BODY_BYTES / 2**20, 2**20))
