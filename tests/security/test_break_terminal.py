"""Issue #32 point 8: a console that has lost its terminal exits, and SIGTERM/SIGHUP end
it within seconds even when its event loop is stuck; never a process left spinning.

- The terminal hangs up but no SIGHUP comes (the console is not the controlling
  process of its pty: `setsid`, a supervisor holding the pty). Before, Textual's input
  thread spun on the EOF reads at full CPU for ever; now the console sees the hang-up
  (POLLHUP on the tty) and stops like a SIGHUP would: its agent killed, its task open.
- The terminal stops reading (a stalled ssh session): the pty fills, Textual's writer
  thread blocks in write(), and the event loop blocks behind it. That is a real wedge,
  no test hook: the loop's own signal handlers never ran, and SIGTERM left the console
  running. Now the stop runs outside the loop and a watchdog ends the process a few
  seconds later, the terminal's modes restored, the agent dead and its task open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.security.test_engine_signals import (
    _agent_pid,
    _assert_stopped_cleanly,
    _project,
    _reap,
    _until,
)

EXIT_S = 20.0  # the watchdog ends a stuck console 5 s after the engine stopped (12 s at most)
#: (write, futex) system call numbers, for telling that the console is stuck
SYSCALLS = {"x86_64": (1, 202), "aarch64": (64, 98)}.get(platform.machine())
HZ = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _console_of(pid: int) -> int:
    """The console itself: the child the process we started forks (cli/detach.py)."""
    found = _until(lambda: _children(pid), timeout=30)
    assert found, "the console never started"
    return found[0]


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return (int(fields[11]) + int(fields[12])) / HZ


def _read_until(fd: int, what: bytes, timeout: float = 60) -> bytes:
    out = bytearray()
    deadline = time.monotonic() + timeout
    while what not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            out += os.read(fd, 65536)
    assert what in out, f"the console never drew {what!r}"
    return bytes(out)


def _gone_within(pid: int, seconds: float, waiter: Callable[[], object]
                 ) -> tuple[float, float]:
    """Wait for `pid` (the console) to end: (seconds it took, CPU seconds it used
    meanwhile, from /proc, the last reading before it went)."""
    started, first = time.monotonic(), _cpu_s(pid) or 0.0
    used = 0.0
    while time.monotonic() - started < seconds:
        cpu = _cpu_s(pid)
        if cpu is None:
            waiter()
            return time.monotonic() - started, used
        used = cpu - first
        time.sleep(0.05)
    pytest.fail(f"the console was still running {seconds:.0f} s later, "
                f"{used:.1f} CPU seconds used meanwhile")


def test_a_console_whose_terminal_hangs_up_without_a_sighup_exits(tmp_path: Path) -> None:
    root, env = _project(tmp_path)
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
    # a new session that never makes the pty its controlling terminal: no SIGHUP comes
    process = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root)],
                               stdin=slave, stdout=slave, stderr=slave, env=env,
                               start_new_session=True, cwd=tmp_path)
    os.close(slave)
    try:
        console = _console_of(process.pid)
        agent = _agent_pid(tmp_path)
        _read_until(master, b"T1")
        time.sleep(1)
        os.close(master)  # the terminal goes away
        master = -1
        took, cpu = _gone_within(console, EXIT_S, lambda: process.wait(timeout=10))
        assert cpu < 3.0, f"{cpu:.1f} CPU seconds in {took:.1f} s: it spun"
        _assert_stopped_cleanly(root, agent)
    finally:
        if master >= 0:
            os.close(master)
        for pid in (*_children(process.pid), process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
        _reap(tmp_path)


def _syscall(pid: int, tid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
    except OSError:
        return []


def _stuck(console: int) -> bool:
    """A thread of the console blocked writing to the terminal (Textual writes to fd 2),
    and its main thread (the event loop) blocked waiting for that writer."""
    assert SYSCALLS is not None
    write, futex = SYSCALLS
    threads = [int(t) for t in os.listdir(f"/proc/{console}/task")]
    writing = any(call[:2] in ([str(write), "0x1"], [str(write), "0x2"]) for call in
                  (_syscall(console, tid) for tid in threads))
    return writing and _syscall(console, console)[:1] == [str(futex)]


@pytest.mark.skipif(SYSCALLS is None, reason="system call numbers known for x86_64, aarch64")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_ends_a_console_whose_event_loop_is_stuck(tmp_path: Path,
                                                                signum: int) -> None:
    root, env = _project(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the console on the pty's slave side, as in a terminal
        os.chdir(tmp_path)
        os.execvpe(sys.executable, [sys.executable, "-m", "console", "-C", str(root)], env)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
        console = _console_of(pid)
        agent = _agent_pid(tmp_path)
        _read_until(fd, b"T1")
        assert not termios.tcgetattr(fd)[3] & termios.ICANON  # the app's raw mode
        # the terminal stops reading; each new size is a full frame the console writes
        for size in range(600):  # at most 30 s: a loaded machine drains the pty slower
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30 + size % 20,
                                                            110 + size % 50, 0, 0))
            time.sleep(0.05)
            if _stuck(console):
                break
        time.sleep(1)
        assert _stuck(console), "the console's event loop never got stuck"
        os.kill(pid, signum)  # to the process the shell started, as an operator would
        _gone_within(console, EXIT_S, lambda: os.waitpid(pid, 0))
        _assert_stopped_cleanly(root, agent)
        lflag = termios.tcgetattr(fd)[3]
        assert lflag & termios.ICANON and lflag & termios.ECHO, "terminal left in raw mode"
    finally:
        for each in (*_children(pid), pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(fd)
        _reap(tmp_path)
