"""Controls against an engine running in another process (the inbox), and ownership."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from console.engine.lock import engine_owner
from console.sdd.paths import SddPaths
from console.sdd.source import LocalSource
from tests.engine_kit import agent_log, make_repo, tasks, ticket


def _cli(root: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def _wait(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_actions_reach_a_running_engine_through_its_inbox(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="cascade: {enabled: false}\n")  # one attempt each
    ticket(root, "fails", id="F", title="fails once", description="exit 2")
    ticket(root, "slow", id="S", title="slow", description="sleep 30")
    env = {**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "agent.log")}
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run",
                               "--workers", "2"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: "F" in tasks(root) and tasks(root)["F"].status == "failed"
              and tasks(root)["S"].status == "in_progress")
        owner = engine_owner(SddPaths(root))
        assert owner is not None and owner.pid == engine.pid

        second = _cli(root, "run", "--until-idle")
        assert second.returncode == 1
        assert f"run by another bernstein-tui engine (pid {engine.pid}" in second.stderr

        cancelled = _cli(root, "cancel", "S", "--reason", "too slow")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == "task S cancelled: too slow"
        _wait(lambda: tasks(root)["S"].status == "cancelled")

        retried = _cli(root, "retry", "F")
        assert retried.returncode == 0 and "open again" in retried.stdout
        assert "a new chain starts from the cheapest tier" in retried.stdout  # said, not hidden
        _wait(lambda: tasks(root)["F"].retry_count == 1
              and tasks(root)["F"].status == "failed")  # the engine ran it again
        refused = _cli(root, "retry", "S")
        assert refused.returncode == 1 and "terminal" in refused.stderr

        paused = _cli(root, "pause")
        assert paused.returncode == 0 and "engine paused" in paused.stdout, paused.stderr
        ticket(root, "later", id="L", title="later", description="exit 0")
        _wait(lambda: "L" in tasks(root))
        time.sleep(1.5)  # several engine ticks: a paused engine dispatches nothing
        assert tasks(root)["L"].status == "open"
        status = LocalSource(root)
        status.load()
        assert status.state.engine_status is not None
        assert status.state.engine_status.paused and status.state.engine_status.workers == 2
        assert status.state.engine_status.pid == engine.pid
        resumed = _cli(root, "resume")
        assert resumed.returncode == 0 and "resumed" in resumed.stdout
        _wait(lambda: tasks(root)["L"].status == "done")
    finally:
        engine.terminate()
        # a clean stop lets an evolution pass that the idle engine started finish first
        # (its sandbox runs the project's tests: minutes on a loaded machine)
        assert engine.wait(timeout=400) == 0
    assert engine_owner(SddPaths(root)) is None  # SIGTERM: a clean stop releases the project
    stopped = LocalSource(root)
    stopped.load()
    assert stopped.state.engine_status is not None and not stopped.state.engine_status.running
    events = [e["event"] for e in agent_log(tmp_path / "agent.log") if e["task"] == "S"]
    assert events == ["start"]  # the cancel killed the sleeping agent before its end
