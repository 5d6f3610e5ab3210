"""Processes die with their owner.

- Agents get `PR_SET_PDEATHSIG` (Linux): the kernel kills an agent when the thread
  that started it ends, so a `kill -9` of the engine takes its agents along. Agents
  are started by the engine's long-lived worker threads, which wait for them, so the
  thread never ends first on its own. A parent that died between fork and prctl is
  caught by checking `getppid()` after setting it.
- SIGHUP (the terminal went away: ssh dropped, tab closed) and SIGTERM stop the
  engine like Ctrl-C does: agents' process groups killed, their tasks back to open,
  the terminal restored, then exit. `run` turns them into KeyboardInterrupt; the
  console's `Stopper` stops the engine in a thread and asks the app to exit, and ends
  the process itself a few seconds later should a stuck event loop or a dead terminal
  keep the app from finishing (the console also asks it when its terminal hangs up).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
PR_SET_PDEATHSIG = 1
#: a console asked to stop: the engine's stop at most (its own limit is 10 s) …
ENGINE_STOP_S = 12.0
#: … then the app has this long to end before the process is ended for it
EXIT_GRACE_S = 5.0


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl (ctypes loaded when first needed: not before the first frame)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None



def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child die with the thread starting it (None where
    the platform has no PDEATHSIG). It only calls prctl, getppid and kill: nothing
    that could wait on a lock another thread held at fork."""
    return die_with_parent_signal(signal.SIGKILL)


def die_with_parent_signal(sig: signal.Signals) -> Callable[[], None] | None:
    """`die_with_parent`, with `sig` instead of SIGKILL (SIGTERM: a clean stop)."""
    prctl = _prctl()  # (resolved here, before the fork: preexec only calls it)
    if prctl is None:
        return None
    parent = os.getpid()
    number = int(sig)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, number, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above: go too
            os.kill(os.getpid(), number)

    return preexec


def set_parent_death_signal(sig: signal.Signals) -> None:
    """This process gets `sig` when the thread that started it ends (Linux; elsewhere
    nothing)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


@contextlib.contextmanager
def signals_handled(handler: Callable[[int, object], None],
                    signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """In the main thread: `handler` for these signals, the previous ones put back after."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stop_signals_interrupt() -> contextlib.AbstractContextManager[None]:
    """In the main thread: SIGHUP and SIGTERM raise KeyboardInterrupt, like Ctrl-C."""

    def on_stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return signals_handled(on_stop)


#: how often a main thread waiting for the engine to stop looks at its signals
SIGNAL_POLL_S = 0.25


def wait_for_stop(stopping: threading.Event) -> None:
    """Wait in the main thread for `stopping`, in short waits: a process-directed signal
    the kernel hands to one of the engine's threads sets Python's flag but does not wake a
    main thread blocked on a lock, so one long wait would run its handler (the stop) only
    when the wait ends — never, for `run` with no timeout."""
    while not stopping.wait(SIGNAL_POLL_S):
        pass


@contextlib.contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """While stopping: a second Ctrl-C, SIGTERM or SIGHUP must not cut the stop short."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN)
                for sig in (signal.SIGINT, *STOP_SIGNALS)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Stopper:
    """Ends a console once, whatever asks first: a stop signal (SIGHUP, SIGTERM) or a lost
    terminal (`request`). `stop` (the engine's: agents killed, tasks reopened) runs in a
    thread, then `exit_app(code)`; a watchdog then gives the app EXIT_GRACE_S to end and
    otherwise ends the process for it: `restore()` (the terminal, as best it can) and
    `os._exit(code)`. An event loop that is stuck (a terminal that stopped reading blocks
    every frame it writes) or a terminal that is gone cannot keep the console alive.

    The handlers are plain `signal.signal` ones, which the interpreter runs in the main
    thread even when its event loop is stuck (between two bytecodes, or when a blocking
    call is interrupted), not the loop's own; they only note the code and write a byte
    to a pipe the watchdog waits on (no lock the interrupted code could hold)."""

    def __init__(self, stop: Callable[[], None], exit_app: Callable[[int], None],
                 restore: Callable[[], None] | None = None) -> None:
        self._stop, self._exit_app, self._restore = stop, exit_app, restore
        self._code = 0
        self._previous: dict[signal.Signals, object] = {}
        self._read_fd, self._write_fd = os.pipe()  # close-on-exec: no child holds them

    def install(self) -> None:
        """In the main thread: the handlers, and the watchdog waiting for a request."""
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread: none
                self._previous[sig] = signal.signal(sig, self._on_signal)
        threading.Thread(target=self._watch, name="stop-watchdog", daemon=True).start()

    def uninstall(self) -> None:
        """In the main thread, once the app has ended: the previous handlers back; the
        watchdog ends too, unless a stop was asked for (then it is the backstop)."""
        for sig, handler in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)  # type: ignore[arg-type]  # as signal.signal gave it
        self._previous.clear()
        if not self._code:
            self._wake(b"-")
            fd, self._write_fd = self._write_fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)

    def request(self, code: int) -> None:
        """Stop and exit with `code` (from any thread, or a signal handler)."""
        if not self._code:
            self._code = code
            self._wake(b"!")

    def _on_signal(self, signum: int, frame: object) -> None:
        self.request(128 + signum)

    def _wake(self, byte: bytes) -> None:
        if self._write_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._write_fd, byte)

    def _watch(self) -> None:
        try:
            asked = os.read(self._read_fd, 1) == b"!"
        finally:
            os.close(self._read_fd)
        if not asked:
            return
        code = self._code
        stopped = threading.Event()

        def finish() -> None:
            try:
                self._stop()
            finally:
                stopped.set()
                with contextlib.suppress(RuntimeError):  # the app's loop already closed
                    self._exit_app(code)

        threading.Thread(target=finish, name="stop-on-signal", daemon=True).start()
        stopped.wait(ENGINE_STOP_S)
        time.sleep(EXIT_GRACE_S)  # a normal exit ends the process (and this thread) first
        if self._restore is not None:
            with contextlib.suppress(Exception):
                self._restore()
        os._exit(code)
