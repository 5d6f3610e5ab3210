"""#15 part 4: processes die with their owner. SIGHUP and SIGTERM to `run` or to the
console (in a real pty), a console whose terminal goes away, and a `kill -9` of the
engine: no agent outlives it, and its task is open again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from console.engine.lock import pid_alive
from tests.engine_kit import agent_log, make_repo, tasks, ticket
from tests.pty_kit import PtyConsole

T = TypeVar("T")
WAIT_S = 60.0  # upper bounds for things that take well under a second; never asserted


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Runs until stopped", description="hang")
    env = {**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "agent.log"),
           "SPEC_AGENT_LOCKS": str(tmp_path / "locks"), "TERM": "xterm-256color"}
    return root, env


def _until(what: Callable[[], T], timeout: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    return what()


def _agent_pid(tmp_path: Path) -> int:
    started = _until(lambda: [e for e in agent_log(tmp_path / "agent.log")
                              if e["event"] == "start"])
    assert started, "the agent never started"
    return int(started[0]["pid"])


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes in the process group."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members


def _reap(tmp_path: Path) -> None:
    """A failed test leaves no agent behind."""
    for entry in agent_log(tmp_path / "agent.log"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(entry["pid"]), signal.SIGKILL)


def _assert_stopped_cleanly(root: Path, agent: int) -> None:
    assert _until(lambda: not _group(agent)), f"agent group {agent} outlived: {_group(agent)}"
    task = tasks(root)["T1"]
    assert task.status == "open", (task.status, task.result_summary)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_run_stops_its_agents_on_a_stop_signal(tmp_path: Path, signum: int) -> None:
    root, env = _project(tmp_path)
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        agent = _agent_pid(tmp_path)
        assert _group(agent) == [agent]
        engine.send_signal(signum)
        output, _ = engine.communicate(timeout=WAIT_S)
    finally:
        engine.kill()
        _reap(tmp_path)
    assert b"Traceback" not in output, output.decode()
    assert b"stopping: killing running agents" in output
    _assert_stopped_cleanly(root, agent)


def test_an_agent_dies_with_a_killed_engine(tmp_path: Path) -> None:
    root, env = _project(tmp_path)
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        agent = _agent_pid(tmp_path)
        engine.send_signal(signal.SIGKILL)  # no handler, no cleanup: only the kernel acts
        engine.wait(timeout=WAIT_S)
        assert _until(lambda: not pid_alive(agent)), "the agent outlived a kill -9 engine"
    finally:
        engine.kill()
        _reap(tmp_path)





def test_console_on_sighup_stops_agents_and_restores_the_terminal(tmp_path: Path) -> None:
    root, env = _project(tmp_path)
    console = PtyConsole(root, env)
    try:
        agent = _agent_pid(tmp_path)
        assert _until(lambda: not console.lflag() & termios.ICANON)  # the app's raw mode
        os.kill(console.pid, signal.SIGHUP)
        status = console.wait()
        assert status is not None, "the console did not exit on SIGHUP"
        _assert_stopped_cleanly(root, agent)
        lflag = console.lflag()
        assert lflag & termios.ICANON and lflag & termios.ECHO, "terminal left in raw mode"
        assert b"\x1b[?1049l" in console.output  # left the alternate screen
    finally:
        console.kill()
        _reap(tmp_path)
        console.close()
        _reap(tmp_path)


def test_console_that_loses_its_terminal_stops_agents(tmp_path: Path) -> None:
    root, env = _project(tmp_path)
    console = PtyConsole(root, env)
    try:
        agent = _agent_pid(tmp_path)
        console.close()  # the terminal goes away (ssh dropped): the kernel sends SIGHUP
        assert console.wait() is not None, "the console outlived its terminal"
        _assert_stopped_cleanly(root, agent)
    finally:
        console.kill()
        _reap(tmp_path)


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """A signal to one thread of `pid` (what the kernel does with a process-directed one
    when it picks a thread other than the main one)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(234, pid, tid, signum) != 0:  # SYS_tgkill on x86_64
        raise OSError(ctypes.get_errno(), "tgkill")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the tgkill number is x86_64's")
def test_run_stops_when_the_signal_lands_on_another_thread(tmp_path: Path) -> None:
    """A SIGTERM that the kernel delivers to one of the engine's threads, not the main
    one, still stops `run` at once (it waited on an Event with no timeout, which such a
    signal never woke: the engine ran on until a second signal)."""
    root, env = _project(tmp_path)
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        agent = _agent_pid(tmp_path)
        others = [int(t) for t in os.listdir(f"/proc/{engine.pid}/task")
                  if int(t) != engine.pid]
        assert others, "the engine has no thread but its main one"
        _tgkill(engine.pid, others[0], signal.SIGTERM)
        output, _ = engine.communicate(timeout=20)
    finally:
        engine.kill()
        _reap(tmp_path)
    assert b"Traceback" not in output, output.decode()
    assert b"stopping: killing running agents" in output
    _assert_stopped_cleanly(root, agent)
