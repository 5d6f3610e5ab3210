"""Who owns a project's `.sdd/`: a live Bernstein, another engine of ours, or nobody.

Our engine holds an exclusive `flock` on `.sdd/runtime/engine.lock` for its whole
life. The kernel drops it when the process dies, even by `kill -9`, so a lock
left by a dead process is simply taken over; the file's text (pid, start time,
command) only says who holds a live one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from console.engine.errors import OwnedElsewhere
from console.engine.served import DEFAULT_PORT, command_line, is_bernstein, served
from console.sdd.confine import UnsafePath, check_write_path
from console.sdd.fileio import read_regular_file
from console.sdd.paths import SddPaths

BERNSTEIN_PID_FILES = ("server.pid", "spawner.pid")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


@dataclass(frozen=True, slots=True)
class Owner:
    what: str  # "bernstein server" | "bernstein spawner" | "bernstein-tui engine"
    pid: int
    detail: str = ""
    url: str | None = None  # a Bernstein task server's, to attach with --server

    def __str__(self) -> str:
        pid = f"pid {self.pid}" if self.pid > 0 else ""
        extra = ", ".join(part for part in (pid, self.detail) if part)
        return f"{self.what} ({extra})" if extra else self.what

    def attach(self, command: str = "") -> str:
        """The exact `bernstein-tui --server …` command to use instead (the token from
        BERNSTEIN_AUTH_TOKEN when it is set, else --token-file)."""
        url = self.url or f"http://127.0.0.1:{DEFAULT_PORT}"
        token = "" if os.environ.get("BERNSTEIN_AUTH_TOKEN", "").strip() else \
            " --token-file FILE"
        return f"bernstein-tui --server {url}{token}" + (f" {command}" if command else "")


def _read_pid_file(path: Path) -> int | None:
    """The pid in a small regular file; a FIFO, device or link out is no pid file (and
    never blocks the engine: opened non-blocking, never followed, read capped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return int(os.read(fd, 64).decode("ascii", "replace").split()[0])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


def bernstein_owner(paths: SddPaths) -> Owner | None:
    """A live Bernstein on the project: a process whose pid file is in runtime/ (a pid only
    counts when that process really is Bernstein, by its command line: a stale file naming
    a reused pid, pid 1 or the operator's shell does not stop the engine), or a
    `bernstein serve`, which writes no pid file (`console.engine.served`)."""
    server = served(paths)
    for name in BERNSTEIN_PID_FILES:
        pid = _read_pid_file(paths.sdd / "runtime" / name)
        if pid is None or pid == os.getpid() or not pid_alive(pid):
            continue
        if is_bernstein(command_line(pid)):
            return Owner(f"bernstein {name.removesuffix('.pid')}", pid, f"runtime/{name}",
                         server.url if server else None)
    if server is not None:
        return Owner("bernstein server", server.pid, server.how, server.url)
    return None


def owned_message(root: Path | None, owner: Owner, command: str = "") -> str:
    """One line: who runs the project, and the `--server` command to use instead (without
    the project's path for the console's header, which shows it already)."""
    if root is None:  # the command first: a narrow header cuts the end
        return f"attach with {owner.attach(command)} (run by a live {owner})"
    return f"{root} is run by a live {owner}; act through its task server: " \
           f"{owner.attach(command)}"


def lock_path(paths: SddPaths) -> Path:
    return paths.sdd / "runtime" / "engine.lock"


def engine_owner(paths: SddPaths) -> Owner | None:
    """Another live engine of ours, judged by trying the lock (never by the pid alone)."""
    path = lock_path(paths)
    try:  # a link or a FIFO planted there: no owner, and no hang
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _describe(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _describe(path: Path) -> Owner:
    try:
        data, _problem = read_regular_file(path, "runtime/engine.lock", 64 * 1024)
        info = json.loads(data or b"")
        return Owner("bernstein-tui engine", int(info["pid"]),
                     f"started {time.strftime('%H:%M:%S', time.localtime(info['started_at']))}"
                     f" on {info.get('host', '?')}")
    except (OSError, ValueError, KeyError, TypeError):
        return Owner("bernstein-tui engine", -1, "lock file unreadable")


def find_owner(paths: SddPaths) -> Owner | None:
    return bernstein_owner(paths) or engine_owner(paths)


class EngineLock:
    """Held while an engine (or a one-shot file control) changes this project's tasks."""

    def __init__(self, paths: SddPaths) -> None:
        self.paths = paths
        self._fd: int | None = None

    def acquire(self) -> None:
        owner = bernstein_owner(self.paths)
        if owner is not None:
            raise OwnedElsewhere(owned_message(None, owner))
        path = lock_path(self.paths)
        check_write_path(path)  # no link from .sdd/ down, the lock file itself included
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                     | os.O_NONBLOCK, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UnsafePath(f"{path} is not a regular file; remove it (the engine's lock)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OwnedElsewhere(f"{self.paths.root} is run by another {_describe(path)}; "
                                 "this one only watches") from None
        info = {"pid": os.getpid(), "started_at": time.time(), "host": socket.gethostname(),
                "argv": sys.argv[:6]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> EngineLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
