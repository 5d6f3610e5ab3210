"""A real terminal (a pty) on hostile data (issue #16 part 1): the byte stream the
console, `run`'s live view and `status` write to the terminal never holds the
corpus's distinctive sequences — no OSC 52 clipboard write with its payload, no
OSC 8 hyperlink to its URL, no title change, no DCS/APC, no 8-bit CSI, no bidi
override — while the same data is shown as visible escapes."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.conftest import REPO
from tests.engine_kit import assert_idle_exit
from tests.security.display_kit import OSC8_URL, OSC52_PAYLOAD, write_hostile_project
from tests.security.test_display_commands import hostile_run_repo

ROWS, COLS = 50, 160
FORBIDDEN = {
    "OSC 52 clipboard write": f"\x1b]52;c;{OSC52_PAYLOAD}".encode(),
    "OSC 8 hyperlink": f"\x1b]8;;{OSC8_URL}".encode(),
    "OSC 0 title": b"\x1b]0;owned",
    "DCS": b"\x1bP1$r0m",
    "APC": b"\x1b_Gf=100",
    "SGR 8 conceal of the data": b"\x1b[8mhidden",
    "8-bit CSI": "\x9b2J".encode(),
    "8-bit OSC": "\x9d0;c1".encode(),
    "RLO bidi override": "\u202e".encode(),
    "zero-width joiner": "\u200d".encode(),
}


def _in_pty(argv: list[str], cwd: Path, keys: list[tuple[bytes, bytes | None]],
            timeout: float = 60) -> tuple[bytes, int | None]:
    """Run argv on a pty of ROWS x COLS; each (wait_for, key) waits until the output
    holds `wait_for` (or a few seconds pass), then types `key`. Returns everything
    written to the terminal and the exit code (None: it had to be killed)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
    env.pop("BERNSTEIN_TUI_DEBUG", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    pending = list(keys)
    waited_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            if pending:
                wait_for, key = pending[0]
                if wait_for in out or time.monotonic() - waited_since > 8:
                    time.sleep(0.3)  # let the screen settle before the next key
                    if key is not None:
                        os.write(master, key)
                    pending.pop(0)
                    waited_since = time.monotonic()
            elif proc.poll() is not None:
                break
        try:  # the terminal closes a moment before the process ends
            code: int | None = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        return bytes(out), code
    finally:
        os.close(master)


def _assert_no_hostile_sequence(stream: bytes, where: str) -> None:
    found = [name for name, sequence in FORBIDDEN.items() if sequence in stream]
    assert not found, f"{where}: reached the terminal: {found}"


def test_the_console_writes_no_hostile_sequence_to_the_terminal(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=time.time())
    steps = [(b"T-evil", None), (b"", b"C"), (b"", b"\x1b"), (b"", b"M"), (b"", b"\x1b"),
             (b"", b"P"), (b"", b"\x1b"), (b"", b"p"), (b"", b"\x1b"), (b"", b"e"),
             (b"", b"n"), (b"", b"q")]
    stream, code = _in_pty([sys.executable, "-m", "console", "-C", str(tmp_path),
                            "--no-engine"], REPO, steps)
    assert b"T-evil" in stream, stream[-2000:]
    assert b"\\x1b]52;c;" in stream  # the data is on screen, as text
    _assert_no_hostile_sequence(stream, "console")
    assert code == 0, stream[-2000:]


def test_run_live_view_writes_no_hostile_sequence(tmp_path: Path) -> None:
    root = hostile_run_repo(tmp_path)
    stream, code = _in_pty([sys.executable, "-m", "console", "-C", str(root), "run",
                            "--until-idle", "--workers", "1"], REPO, [], timeout=120)
    _assert_no_hostile_sequence(stream, "run --until-idle")
    assert b"Traceback" not in stream and b"MarkupError" not in stream, stream[-3000:]
    assert_idle_exit(root, code, stream)
    assert b"\\x1b]52;c;" in stream


def test_status_on_a_terminal_writes_no_hostile_sequence(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=time.time())
    stream, code = _in_pty([sys.executable, "-m", "console", "-C", str(tmp_path), "status"],
                           REPO, [])
    _assert_no_hostile_sequence(stream, "status")
    assert code == 0, stream[-3000:]
    assert b"\\x1b]52;c;" in stream
