"""#19.3: quit that respects the work. `q` asks while agents run (stop, detach, cancel),
ctrl+c twice forces, the header says whose engine runs the project and shows a dead one
as dead, and an engine starts once the project allows it — all without a restart."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.engine.lock import pid_alive
from console.tui.app import ConsoleApp
from console.tui.screens.quit_dialog import QuitDialog
from tests.engine_kit import agent_log, make_repo, tasks, ticket
from tests.pty_kit import PtyConsole
from tests.security.test_engine_signals import _group, _reap, _until
from tests.test_tui import Notes, wait_for


def _hanging(tmp_path: Path, monkeypatch) -> Path:
    root = make_repo(tmp_path)
    monkeypatch.setenv("SPEC_AGENT_LOG", str(tmp_path / "agent.log"))
    monkeypatch.setenv("SPEC_AGENT_LOCKS", str(tmp_path / "locks"))
    ticket(root, "t1", id="T1", title="Runs until stopped", description="hang")
    return root


async def test_q_with_agents_running_asks_and_cancel_keeps_them(tmp_path: Path,
                                                                 monkeypatch) -> None:
    root = _hanging(tmp_path, monkeypatch)
    app = ConsoleApp(root, engine=True)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.engine is not None and app.engine.running,
                           timeout=30)
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, QuitDialog))
            text = " ".join(str(w.render()) for w in app.screen.query("Static"))
            assert "1 agent at work" in text and "reopens their tasks" in text
            assert not app.screen.query("#detach")  # no CLI to carry the engine on
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, QuitDialog))
            assert app.is_running and app.engine.running  # nothing stopped
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, QuitDialog))
            await pilot.press("s")  # stop and quit
            await wait_for(pilot, lambda: not app.is_running, timeout=30)
    finally:
        _reap(tmp_path)
    assert app.engine is not None and not app.engine.lock.held
    assert tasks(root)["T1"].status == "open"  # the stopped attempt's task reopened


async def test_q_with_nothing_running_quits_at_once(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    app = ConsoleApp(root, engine=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.engine is not None, timeout=30)
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running)
    assert not app.engine.lock.held


async def test_ctrl_c_twice_forces_quit(tmp_path: Path, monkeypatch) -> None:
    root = _hanging(tmp_path, monkeypatch)
    app = ConsoleApp(root, engine=True)
    notes = Notes()
    try:
        async with app.run_test(size=(120, 30), message_hook=notes) as pilot:
            await wait_for(pilot, lambda: app.engine is not None and app.engine.running,
                           timeout=30)
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: notes.said("ctrl+c again to stop the engine"))
            assert app.is_running
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: not app.is_running, timeout=30)
    finally:
        _reap(tmp_path)
    assert tasks(root)["T1"].status == "open"


async def test_the_engine_starts_once_the_project_allows_it(tmp_path: Path) -> None:
    """Opened on a directory with `.sdd/` but no git: not started; `git init` and a
    commit from another shell: the engine starts, no restart."""
    root = tmp_path / "later"
    root.mkdir()
    subprocess.run([sys.executable, "-m", "console", "-C", str(root), "init"], check=True,
                   capture_output=True)
    app = ConsoleApp(root, engine=True)
    async with app.run_test(size=(120, 30)) as pilot:
        status = app.query_one("#status")
        await wait_for(pilot, lambda: "not a git repository" in str(status.render()),
                       timeout=20)
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
        for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
            subprocess.run(["git", *argv], cwd=root, env=env, check=True)
        await wait_for(pilot, lambda: "workers busy" in str(status.render()), timeout=30)
        assert app.engine is not None and app.engine.lock.held


async def test_a_dead_engine_is_shown_dead(tmp_path: Path) -> None:
    """engine_status.json says running, but its process was killed -9: the header says
    the pid is dead instead of showing its figures."""
    root = make_repo(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    runtime = root / ".sdd" / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    (runtime / "engine_status.json").write_text(json.dumps(
        {"pid": dead.pid, "workers": 2, "busy": 1, "paused": False, "running": True,
         "base": "main", "updated_at": time.time()}))
    app = ConsoleApp(root, engine=False)
    async with app.run_test(size=(120, 30)) as pilot:
        status = app.query_one("#status")
        await wait_for(pilot, lambda: f"pid {dead.pid} is dead" in str(status.render()),
                       timeout=20)
        assert "workers busy" not in str(status.render())


def test_detach_keeps_the_engine_and_the_next_console_attaches(tmp_path: Path) -> None:
    """In a real pty: q, d — the shell gets its exit 0 and the line to come back by; the
    engine and its agent run on; a second console says the engine is not its own; a
    SIGTERM to the background engine stops its agent and reopens the task."""
    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Runs until stopped", description="hang")
    env = {**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "agent.log"),
           "SPEC_AGENT_LOCKS": str(tmp_path / "locks"), "TERM": "xterm-256color"}
    first = PtyConsole(root, env)
    second = None
    background = 0
    try:
        started = _until(lambda: [e for e in agent_log(tmp_path / "agent.log")
                                  if e["event"] == "start"])
        assert started, "the agent never started"
        agent = int(started[0]["pid"])
        assert _until(lambda: b"workers busy" in first.output), first.output[-2000:]
        os.write(first.fd, b"q")
        assert _until(lambda: b"Detach (d)" in first.output), first.output[-2000:]
        os.write(first.fd, b"d")
        status = first.wait()
        assert status is not None and os.waitstatus_to_exitcode(status) == 0
        said = _until(lambda: re.search(rb"background \(pid (\d+)\)", first.output))
        assert said, first.output[-2000:]
        background = int(said.group(1))
        assert background != first.pid and pid_alive(background)
        assert _group(agent) == [agent]  # its agent works on
        assert tasks(root)["T1"].status == "in_progress"
        second = PtyConsole(root, env)
        assert _until(lambda: b"not started here" in second.output), second.output[-3000:]
        os.write(second.fd, b"q")  # not its engine: quits at once, the engine stays
        assert second.wait() is not None
        assert pid_alive(background) and _group(agent) == [agent]
        os.kill(background, signal.SIGTERM)
        assert _until(lambda: not pid_alive(background)), "the background engine lived on"
        assert _until(lambda: not _group(agent)), "its agent outlived it"
        assert tasks(root)["T1"].status == "open"
    finally:
        if background and pid_alive(background):
            os.kill(background, signal.SIGKILL)
        for console in (first, second):
            if console is not None:
                console.kill()
                console.close()
        _reap(tmp_path)
