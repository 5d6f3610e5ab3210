"""The console on a real pty, as a terminal runs it: its output drained (so it never
blocks writing), keys typed, its terminal modes read, its exit waited for."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import threading
import time
from pathlib import Path


class PtyConsole:
    """`bernstein-tui -C ROOT [ARGS]` on a real pty (110x30), run from `/`."""

    def __init__(self, root: Path, env: dict[str, str], *args: str) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the console on the pty's slave side
            os.chdir("/")
            os.execvpe(sys.executable,
                       [sys.executable, "-m", "console", "-C", str(root), *args], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
        self.output = bytearray()
        self.closed = False
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while not self.closed:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if ready:
                    chunk = os.read(self.fd, 65536)
                    if not chunk:
                        return
                    self.output += chunk
            except OSError:  # EIO: the slave side closed (the console exited)
                return

    def press(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def lflag(self) -> int:
        return termios.tcgetattr(self.fd)[3]

    def wait(self, timeout: float = 60) -> int | None:
        """The exit status, or None if it is still running after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            time.sleep(0.05)
        return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)

    def close(self) -> None:
        """Stop draining and close our side of the pty (the console sees a hang-up)."""
        self.closed = True
        self.reader.join(timeout=5)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
