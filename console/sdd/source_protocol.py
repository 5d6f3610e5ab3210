"""What the console reads from, as a type: a project's `.sdd/` on this machine
(`sdd.source.LocalSource`) or a Bernstein task server (`remote.source.RemoteSource`).

The TUI knows only this protocol. What differs is said by capabilities, never found out
by duck typing: `root` is the project directory when the source reads one on this
machine (trust, the engine, worktrees and `bernstein.yaml` need it) and None for a
server; `health_line()` is the header's line about a server and None for a local one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from console.sdd.state import Delta, State
from console.sdd.task_live import TaskLive


class Source(Protocol):
    """A live State and the thread that keeps it current (see the module docstring)."""

    state: State
    lock: threading.RLock
    loaded: threading.Event  # set once the first full read is in the State
    shown: threading.Event  # set by the console once its first rows are on screen

    @property
    def exists(self) -> bool:
        """Whether there is anything to read (a `.sdd/`, a server that answered)."""
        ...

    @property
    def root(self) -> Path | None:
        """The project directory on this machine; None for a task server."""
        ...

    def describe(self) -> str:
        """Where it reads from, for the header: a path or a server's address."""
        ...

    def health_line(self) -> str | None:
        """The header's line about the server (latency, stream, draining); None when
        the source is a local project."""
        ...

    def load_progress(self) -> tuple[int, int] | None:
        """(bytes read, bytes to read) while the first full read runs, for the header's
        "reading" line; None when there is no such figure (done, or a server)."""
        ...

    def task_live(self, task_id: str) -> TaskLive:
        """Progress, last heartbeat and agent log of one task (a worker thread's job)."""
        ...

    def start(self, on_delta: Callable[[Delta], None], *,
              on_error: Callable[[str], None] | None = None) -> None:
        """Load, then follow changes in a thread, handing each batch to `on_delta`."""
        ...

    def stop(self, timeout: float = 2.0) -> None:
        ...
