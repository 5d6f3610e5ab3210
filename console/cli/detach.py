"""Detach (issue #19.3): the console's engine keeps running in the background after its
screen closes, and the shell gets its prompt back.

The shell waits for the process it started, and the engine's agents are children of
the process whose threads run it; so the console runs in a child forked before any
thread exists, and the process the shell started only waits for it, passing on stop
signals. On detach the child restores the terminal (the app has exited), leaves the
terminal's session, tells the waiting parent, which exits 0 with the line to come back
by, and carries the engine on headless until a stop signal — exactly as `bernstein-tui
run` would. The next console on the project finds that engine holding its lock and
watches it, acting through its inbox.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.sdd.sanitize import display_text

if TYPE_CHECKING:
    from console.engine.engine import Engine

#: signals the waiting parent passes on to the console
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
MESSAGE_LIMIT = 4096


class Detacher:
    """In the console's process: how to hand the shell back while the engine runs on."""

    def __init__(self, write_fd: int) -> None:
        self._fd = write_fd

    def carry_on(self, engine: Engine, line: str) -> int:
        """After the app has exited: leave the terminal, let the parent go with `line`,
        and run `engine` until a stop signal (then stop it as `run` does)."""
        from console.engine.lifecycle import (
            stop_signals_ignored,
            stop_signals_interrupt,
            wait_for_stop,
        )

        with contextlib.suppress(OSError):
            os.setsid()  # the terminal's hang-up is no longer ours
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)
        self.tell(line)
        with stop_signals_interrupt():
            try:
                wait_for_stop(engine.stopping)
            except KeyboardInterrupt:
                pass
            finally:
                with stop_signals_ignored():
                    engine.stop()
        return 0

    def tell(self, line: str) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._fd, line.encode()[:MESSAGE_LIMIT])
            os.close(self._fd)
        self._fd = -1


def run_detachable(body: Callable[[Detacher | None], int]) -> int:
    """`body(detacher)` in a forked child the parent waits for; `body(None)` in this
    process where a fork is not safe (a thread already runs) or not possible."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return body(None)
    read_fd, write_fd = os.pipe()  # both close-on-exec: agents never hold them
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the console
        os.close(read_fd)
        code = 1
        try:
            code = body(Detacher(write_fd))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    return _wait_for(pid, read_fd)


def _wait_for(pid: int, read_fd: int) -> int:
    """The parent: pass stop signals on; return when the console exits (its code) or
    detaches (0, after saying how to come back)."""
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        chunks: list[bytes] = []
        while chunk := os.read(read_fd, MESSAGE_LIMIT):  # retried after a signal
            chunks.append(chunk)
        os.close(read_fd)
        said = b"".join(chunks).decode("utf-8", "replace")
        if said:  # detached: the console runs on without a terminal
            print(display_text(said, multiline=True), file=sys.stderr)
            return 0
        _done, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        return 128 - code if code < 0 else code  # killed by a signal: as a shell says
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
