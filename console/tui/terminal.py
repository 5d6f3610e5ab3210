"""The console's terminal, for the moments Textual cannot look after it.

- A terminal can go away without a SIGHUP reaching us (the console is not the
  session's controlling process: started with `setsid`, or by a supervisor holding
  the pty): its reads then return EOF or EIO at once, and Textual's input thread spins
  on them. `watch_hangup` waits (in `poll`, no CPU) for the hang-up itself — POLLHUP,
  POLLERR or POLLNVAL on the tty — and says so once.
- When the process has to be ended without Textual's orderly exit (a stuck event loop,
  lifecycle.Stopper), `restore` puts back what it can without ever blocking: the
  terminal's modes as they were before the app, and the alternate screen, cursor,
  mouse, paste and focus reporting switched back off.
"""

from __future__ import annotations

import contextlib
import os
import select
import termios
import threading
from collections.abc import Callable
from typing import Any

#: what Textual's driver switches off when it stops (Kitty keys, alternate screen,
#: cursor, focus events, mouse reporting, bracketed paste, line wrap back on)
RESET = (b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l\x1b[?1000l\x1b[?1003l\x1b[?1015l"
         b"\x1b[?1006l\x1b[?2004l\x1b[?7h")
_LOST = select.POLLHUP | select.POLLERR | select.POLLNVAL


class Terminal:
    """The terminal on stdin/stdout, as it was when the console started (nothing when
    neither is one)."""

    def __init__(self) -> None:
        self.fds = [fd for fd in (0, 1) if _isatty(fd)]
        self.name: str | None = None
        self.saved: list[Any] | None = None
        if self.fds:
            with contextlib.suppress(OSError):
                self.name = os.ttyname(self.fds[0])
            with contextlib.suppress(termios.error, OSError):
                self.saved = termios.tcgetattr(self.fds[0])
        self._wake_r = self._wake_w = -1

    def watch_hangup(self, on_lost: Callable[[], None]) -> None:
        """`on_lost()` (from a thread) once the terminal hangs up; `stop_watching` ends
        the wait."""
        if not self.fds or self._wake_r >= 0:
            return
        self._wake_r, self._wake_w = os.pipe()
        threading.Thread(target=self._watch, args=(on_lost, self._wake_r),
                         name="terminal-watch", daemon=True).start()

    def stop_watching(self) -> None:
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
                os.close(self._wake_w)
            self._wake_w = -1

    def _watch(self, on_lost: Callable[[], None], wake: int) -> None:
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, 0)  # events 0: only a hang-up or an error is reported
        poller.register(wake, select.POLLIN)
        try:
            while True:
                events = poller.poll()
                if any(fd == wake for fd, _ in events):
                    return
                if any(mask & _LOST for _, mask in events):
                    on_lost()
                    return
        finally:
            os.close(wake)

    def restore(self) -> None:
        """Best effort, never blocking (a terminal that stopped reading has a full
        buffer): opened again non-blocking, the sequences written if they fit, the saved
        modes set at once (TCSANOW waits for no output)."""
        if self.name is None:
            return
        try:
            fd = os.open(self.name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            with contextlib.suppress(OSError):
                os.write(fd, RESET)
            if self.saved is not None:
                with contextlib.suppress(termios.error, OSError):
                    termios.tcsetattr(fd, termios.TCSANOW, self.saved)
        finally:
            os.close(fd)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
