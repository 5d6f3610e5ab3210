"""Processes die with their owner.

- Agents get `PR_SET_PDEATHSIG` (Linux): the kernel kills an agent when the thread
  that started it ends, so a `kill -9` of the engine takes its agents along. Agents
  are started by the engine's long-lived worker threads, which wait for them, so the
  thread never ends first on its own. A parent that died between fork and prctl is
  caught by checking `getppid()` after setting it.
- SIGHUP (the terminal went away: ssh dropped, tab closed) and SIGTERM stop the
  engine like Ctrl-C does: agents' process groups killed, their tasks back to open,
  the terminal restored, then exit. `run` turns them into KeyboardInterrupt; the
  console asks its event loop to stop the engine first and then exit, with a backstop
  exit should a dead terminal keep the console from finishing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
PR_SET_PDEATHSIG = 1
EXIT_BACKSTOP_S = 15.0


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


def on_stop_signals(stop: Callable[[], object], exit_app: Callable[[int], None]) -> None:
    """For an app on the running asyncio loop (the console): on SIGHUP or SIGTERM run
    `stop` (the engine's) in a thread, then `exit_app(128 + signal)` from that thread;
    if the process is still there EXIT_BACKSTOP_S later, it exits anyway (the engine
    is stopped by then; a terminal that is gone can keep the app from finishing)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    fired = threading.Event()

    def finish(signum: int) -> None:
        code = 128 + signum
        try:
            stop()
        finally:
            backstop = threading.Timer(EXIT_BACKSTOP_S, os._exit, (code,))
            backstop.daemon = True  # a normal exit does not wait for it
            backstop.start()
            exit_app(code)

    def handler(signum: int) -> None:
        if fired.is_set():
            return
        fired.set()
        threading.Thread(target=finish, args=(signum,), name="stop-on-signal",
                         daemon=True).start()

    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(sig, handler, int(sig))  # main thread only
