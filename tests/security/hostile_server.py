"""A hostile (or broken) Bernstein task server on 127.0.0.1, a YAML alias bomb, and a way
to measure the command line against them.

Every route answers as a small healthy server would (three tasks, one of them failed,
and an event stream with heartbeats) unless `modes` names it: then the route
misbehaves in that mode. Huge bodies are generated as they are sent, never held.

Modes:
    drip-head       the status line, one byte every `drip_s`, forever
    drip-body       a 1 MB Content-Length, then one body byte every `drip_s`
    huge            Content-Length 500 MB, and bytes until the client hangs up
    huge-chunked    chunked, no length: bytes until the client hangs up
    endless-line    an event stream whose one line never ends
    endless-data    an event stream of `data:` lines that never end the event
    paging-repeat   GET /tasks: the same page again and again, `total` 10^12
    paging-fresh    GET /tasks: new tasks on every page, `total` 10^12
    counts-huge     GET /tasks/counts: total 10^12
    shapes          lists for objects, strings for numbers, nulls
    markup          a 500 whose detail is Rich markup
    escapes         task titles and details carrying terminal escape sequences
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.bernstein_server import serve

HUGE = 500 * 1024 * 1024
TRILLION = 10 ** 12
MARKUP = "[/] [bold red]boom[/bold red] [link=http://x]click[/link] [/"
ESCAPES = ("\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b[2J\x1b[H", "\x1b[8mhidden\x1b[0m", "\x9b2J",
           "\x1bP1$qm\x1b\\", "\u202eevil", "[/]")
STATUSES = ("open", "failed", "done")


def task(task_id: str, title: str, status: str = "open", **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "title": title, "description": title, "role": "backend",
            "priority": 2, "status": status, "created_at": 1_700_000_000.0, "version": 1,
            "depends_on": [], "owned_files": [], "completion_signals": [],
            "progress_log": [], "metadata": {}, **fields}


def healthy_tasks() -> list[dict[str, Any]]:
    return [task(f"t{i}", f"Task {i}", status) for i, status in enumerate(STATUSES)]


class HostileServer:
    """`modes`: route path → mode; `url` once started; `stop()` ends it."""

    def __init__(self, modes: dict[str, str] | None = None, *, drip_s: float = 0.5) -> None:
        self.modes = dict(modes or {})
        self.drip_s = drip_s
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def start(self) -> HostileServer:
        owner = self

        class Handler(_Handler):
            server_state = owner

        self._server = serve(Handler, "hostile-server")
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        self.closed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_state: HostileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        state = self.server_state
        with state.lock:
            state.hits[path] = state.hits.get(path, 0) + 1
        mode = state.modes.get(path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        try:
            if mode is None:
                self._healthy(path, query)
            else:
                getattr(self, "_" + mode.replace("-", "_"))(path, query)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client hung up: what a client with limits does

    # -- well-behaved -----------------------------------------------------------

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _healthy(self, path: str, query: dict[str, str]) -> None:
        tasks = healthy_tasks()
        if path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/tasks":
            if "limit" in query:
                offset = int(query.get("offset", 0))
                self._json(200, {"tasks": tasks[offset:offset + int(query["limit"])],
                                 "total": len(tasks), "limit": int(query["limit"]),
                                 "offset": offset})
            else:
                self._json(200, tasks)
        elif path == "/tasks/counts":
            counts = {s: sum(t["status"] == s for t in tasks) for s in STATUSES}
            self._json(200, {**counts, "total": len(tasks)})
        elif path == "/tasks/archive":
            self._json(200, [])
        elif path == "/approvals":
            self._json(200, {"pending": []})
        elif path.startswith("/tasks/") and path.endswith("/gates"):
            self._json(404, {"detail": "no gate report"})
        elif path.startswith("/tasks/"):
            found = [t for t in tasks if t["id"] == path.split("/")[2]]
            self._json(200 if found else 404, found[0] if found else {"detail": "not found"})
        elif path == "/events":
            self._stream_head()
            while not self.server_state.closed.wait(0.5):
                self.wfile.write(b": heartbeat\n\n")
                self.wfile.flush()
        else:
            self._json(404, {"detail": "Not Found"})

    def _stream_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()

    # -- hostile ----------------------------------------------------------------

    def _forever(self, piece: bytes, pause: float = 0.0) -> None:
        while not self.server_state.closed.is_set():
            self.wfile.write(piece)
            self.wfile.flush()
            if pause:
                time.sleep(pause)

    def _drip_head(self, path: str, query: dict[str, str]) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 10_000_000:
            if self.server_state.closed.wait(self.server_state.drip_s):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def _drip_body(self, path: str, query: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1024 * 1024))
        self.end_headers()
        self._forever(b" ", self.server_state.drip_s)

    def _huge(self, path: str, query: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        self._forever(b"[" + b" " * 65535)

    def _huge_chunked(self, path: str, query: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b'{"id": "x", "title": "' + b"y" * 65000 + b'"}, '
        self._forever(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")

    def _endless_line(self, path: str, query: dict[str, str]) -> None:
        self._stream_head()
        self.wfile.write(b": hello\n\nevent: task_update\ndata: ")
        self._forever(b"x" * 65536)

    def _endless_data(self, path: str, query: dict[str, str]) -> None:
        self._stream_head()
        self.wfile.write(b"event: task_update\n")
        self._forever(b"data: " + b"x" * 4000 + b"\n")

    def _paging_repeat(self, path: str, query: dict[str, str]) -> None:
        if "limit" not in query:
            return self._json(200, healthy_tasks())
        self._json(200, {"tasks": healthy_tasks(), "total": TRILLION,
                         "limit": int(query["limit"]), "offset": int(query.get("offset", 0))})

    def _paging_fresh(self, path: str, query: dict[str, str]) -> None:
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 500))
        page = [{"id": f"f{offset + i}", "title": "fresh", "status": "open"}
                for i in range(limit)]
        self._json(200, {"tasks": page, "total": TRILLION, "limit": limit, "offset": offset})

    def _counts_huge(self, path: str, query: dict[str, str]) -> None:
        self._json(200, {"open": TRILLION, "total": TRILLION})

    def _shapes(self, path: str, query: dict[str, str]) -> None:
        bodies: dict[str, Any] = {
            "/health": ["ok"],
            "/tasks": {"tasks": [1, "two", None, [], {"id": None},
                                 {"id": 7, "title": ["x"], "status": 3},
                                 task("s1", "Shapes", "failed", priority="high",
                                      created_at="yesterday", depends_on="t0",
                                      progress_log={"a": 1}, version=None, metadata=[]),
                                 task("s2", "Whole", "open", priority="2", version="3")],
                       "total": "seven", "limit": "500", "offset": None},
            "/tasks/counts": [1, 2, 3],
            "/tasks/archive": {"archive": "none"},
            "/approvals": {"pending": "none"},
        }
        self._json(200, bodies.get(path))

    def _markup(self, path: str, query: dict[str, str]) -> None:
        self._json(500, {"detail": MARKUP})

    def _escapes(self, path: str, query: dict[str, str]) -> None:
        tasks = [task(f"e{i}", f"title {esc} end", "failed", result_summary=esc,
                      role="backend") for i, esc in enumerate(ESCAPES)]
        if path == "/tasks":
            return self._json(200, {"tasks": tasks, "total": len(tasks), "limit": 500,
                                    "offset": 0} if "limit" in query else tasks)
        self._json(500, {"detail": "".join(ESCAPES)})


# -- hostile YAML -------------------------------------------------------------------

def alias_bomb(levels: int = 8, width: int = 9, key: str = "role") -> str:
    """`levels` of `width` aliases each: width**levels values in ~40 bytes a level."""
    lines = ["title: bomb", 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * width) + "]")
    lines.append(f"{key}: *l{levels - 1}")
    return "\n".join(lines) + "\n"



# -- the command line, measured ---------------------------------------------------

@dataclass
class Measured:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float  # the child's own peak resident memory
    seconds: float


#: runs argv[2:] and writes its peak RSS (KiB) to argv[1]. A small process of its own:
#: a child's ru_maxrss starts at the peak of the process that started it (Linux carries
#: the old memory's high-water mark across exec), so the child must not be started by a
#: big pytest or benchmark process directly.
_WRAPPER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(argv: list[str], *, env: dict[str, str] | None = None,
                 timeout: float = 120.0, cwd: Path | None = None) -> Measured:
    """Run `argv` to its end; its output and its own peak RSS. Killed (its whole process
    group) after `timeout` s: a guard against a hang only."""
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-I", "-c", _WRAPPER, str(rss_file), *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"{argv[-3:]} still running after {timeout} s") from None
        seconds = time.monotonic() - started
        peak = int(rss_file.read_text()) / 1024 if rss_file.exists() else float("nan")
    return Measured(proc.returncode, out.decode("utf-8", "replace"),
                    err.decode("utf-8", "replace"), peak, seconds)
