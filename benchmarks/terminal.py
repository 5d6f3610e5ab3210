"""A program on a real pty (pexpect), its screen output drained and searched as it arrives.

`Screen.start(argv)` notes the wall clock just before the spawn; `wait_text` returns
when a string first appeared in the output (the moment the drain thread read it);
`wait_trace` reads the console's BERNSTEIN_TUI_TRACE marks. The drain thread keeps
the pty empty, so the program never blocks on a full terminal.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pexpect

ROWS, COLS = 40, 120
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


class Screen:
    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 needles: tuple[str, ...] = ()) -> None:
        full_env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
        full_env.pop("BERNSTEIN_TUI_TRACE", None)
        full_env.update(env or {})
        self._needles = {n.encode() for n in needles}
        self._found: dict[bytes, float] = {}
        self._text = b""
        self._cond = threading.Condition()
        self.started = time.time()
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=full_env,
                                   dimensions=(ROWS, COLS), echo=False)
        self._done = False
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return int(self.child.pid)

    def _drain(self) -> None:
        while True:
            try:
                data = self.child.read_nonblocking(65536, timeout=0.5)
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError, ValueError):
                break
            now = time.time()
            with self._cond:
                # keep a bounded, escape-free text to search (enough for a screen or two)
                self._text = (self._text + _ANSI.sub(b"", data))[-200_000:]
                for needle in self._needles - self._found.keys():
                    if needle in self._text:
                        self._found[needle] = now
                self._cond.notify_all()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def wait_text(self, needle: str, timeout: float = 30.0) -> float:
        """Epoch seconds at which `needle` (one of `needles`) was first read from the pty."""
        target = needle.encode()
        assert target in self._needles, "name the text to wait for when starting"
        deadline = time.monotonic() + timeout
        with self._cond:
            while target not in self._found:
                left = deadline - time.monotonic()
                if left <= 0 or self._done:
                    dump = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-screen-timeout.txt"
                    dump.write_bytes(self._text[-20_000:])
                    raise TimeoutError(f"{needle!r} not on screen after {timeout} s "
                                       f"(what was, in {dump})")
                self._cond.wait(left)
            return self._found[target]

    def wait_exit(self, timeout: float) -> None:
        """Until the program closed its terminal (it exited)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._done and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        self._thread.join(2)
        self.child.close(force=True)


def read_marks(path: Path) -> list[dict[str, Any]]:
    """The marks written so far; a last line still being written is left for later."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def wait_trace(path: Path, predicate: Any, timeout: float = 60.0,
               step: float = 0.005) -> dict[str, Any]:
    """The first trace mark that satisfies `predicate`, waiting for it to be written."""
    deadline = time.monotonic() + timeout
    seen = 0
    while True:
        marks = read_marks(path)
        for mark in marks[seen:]:
            if predicate(mark):
                return mark
        seen = len(marks)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no matching mark in {path} after {timeout} s")
        time.sleep(step)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_settled(pid: int, *, window: float = 1.0, below: float = 0.05,
                 timeout: float = 180.0) -> float:
    """Until a process used under `below` of a core over `window` s (a sliding window,
    sampled every tenth of it); returns when that window began (time.time())."""
    started = time.monotonic()
    samples = deque([(time.time(), proc_cpu_seconds(pid))])
    while time.monotonic() - started < timeout:
        time.sleep(window / 10)
        samples.append((time.time(), proc_cpu_seconds(pid)))
        while samples[-1][0] - samples[1][0] >= window:
            samples.popleft()  # (the oldest sample that still spans a window)
        (first, cpu_first), (last, cpu_last) = samples[0], samples[-1]
        if last - first >= window and (cpu_last - cpu_first) / (last - first) < below:
            return first
    return time.time()
