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
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from console.engine.errors import OwnedElsewhere
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

    def __str__(self) -> str:
        extra = f", {self.detail}" if self.detail else ""
        return f"{self.what} (pid {self.pid}{extra})"


def bernstein_owner(paths: SddPaths) -> Owner | None:
    """A live Bernstein process whose pid file is in runtime/."""
    for name in BERNSTEIN_PID_FILES:
        path = paths.sdd / "runtime" / name
        try:
            pid = int(path.read_text(encoding="ascii", errors="replace").strip().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if pid_alive(pid):
            return Owner(f"bernstein {name.removesuffix('.pid')}", pid, f"runtime/{name}")
    return None


def lock_path(paths: SddPaths) -> Path:
    return paths.sdd / "runtime" / "engine.lock"


def engine_owner(paths: SddPaths) -> Owner | None:
    """Another live engine of ours, judged by trying the lock (never by the pid alone)."""
    path = lock_path(paths)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
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
        info = json.loads(path.read_text())
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
            raise OwnedElsewhere(f"{self.paths.root} is run by a live {owner}; "
                                 "the console only watches (attach with --server URL)")
        path = lock_path(self.paths)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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
