"""Processes a dead engine left behind: found, waited for or killed before anything reruns.

Every process the engine starts (agents, janitor commands, git) carries
BERNSTEIN_TUI_PROJECT=<project root> in its environment, and each agent's pid is
also recorded in runtime/pids/. A new engine calls `reap_orphans` while holding
the project lock, so every marked process it finds belongs to an engine that is
gone: agents are killed with their process groups; git commands are given time
to finish (killing git mid-write would leave the repository half-updated).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

from console.engine.events import EventLog
from console.sdd.confine import SddDir
from console.sdd.paths import SddPaths

PROJECT_MARKER = "BERNSTEIN_TUI_PROJECT"
SESSION_MARKER = "BERNSTEIN_TUI_SESSION"


def proc_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks (/proc), to tell a pid from its reuse."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def carries_marker(pid: int, root: str, marker: str = PROJECT_MARKER) -> bool:
    """The process's environment has marker=root: the engine started it for this project."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{marker}={root}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def marked_processes(root: str, marker: str = PROJECT_MARKER) -> list[int]:
    """Live processes whose environment carries marker=root."""
    return [int(entry) for entry in (os.listdir("/proc") if os.path.isdir("/proc") else [])
            if entry.isdigit() and int(entry) != os.getpid()
            and carries_marker(int(entry), root, marker)]


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        pgid = os.getpgid(pid)
        if pgid == pid:
            os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _reap_agents(paths: SddPaths, events: EventLog, pids: SddDir) -> list[str]:
    tasks = []
    for name in sorted(n for n in pids.names() if n.endswith(".json")):
        try:  # a regular file of a few KB only: a link, /dev/zero or a FIFO is dropped
            data, _problem = pids.read(name, 64 * 1024)
            info = json.loads(data or b"")
            pgid, ticks = int(info["pgid"]), info.get("start_ticks")
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                pids.unlink(name)
            continue
        # a pid file is data: only a process this project's engine started is killed
        if (ticks is not None and proc_start_ticks(pgid) == ticks
                and carries_marker(pgid, str(paths.root))):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                events.warning(f"killed agent {info.get('session')} (pid {pgid}) left running "
                               "by a stopped engine", task_id=info.get("task_id"))
        tasks.append(str(info.get("task_id")))
        with contextlib.suppress(OSError):
            pids.unlink(name)
    return tasks


def reap_orphans(paths: SddPaths, events: EventLog, *, git_wait_s: float = 10.0) -> list[str]:
    """Kill a dead engine's agents, let its git commands finish; return the agents' task ids."""
    try:  # read and removed through the directory's descriptor: a link swapped in for
        with SddDir(paths.root, "runtime", "pids") as pids:  # it removes nothing elsewhere
            tasks = _reap_agents(paths, events, pids)
    except OSError:
        tasks = []
    root = str(paths.root)
    deadline = time.monotonic() + git_wait_s
    while True:
        marked = marked_processes(root)
        gits = [pid for pid in marked if _comm(pid).startswith("git")]
        for pid in marked:
            if pid not in gits:
                _kill(pid)  # an agent (or its child) started but never recorded
        if not gits:
            break
        if time.monotonic() > deadline:
            for pid in gits:
                _kill(pid)
            events.warning(f"killed {len(gits)} git command(s) a stopped engine left running")
            break
        time.sleep(0.05)
    return tasks


def kill_session(session: str) -> int:
    """Kill whatever one agent session left running, detached children included."""
    pids = marked_processes(session, SESSION_MARKER)
    for pid in pids:
        _kill(pid)
    return len(pids)


def protect_environment() -> bool:
    """Make this process's /proc entries (its environment: API keys) unreadable to the
    agents it starts, which run as the same user (prctl PR_SET_DUMPABLE 0). Linux only."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False
