"""kill -9 a real engine at 20 random moments of a 30-task run; after each restart every
invariant holds, and the run completes with nothing lost and nothing run twice at once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.model import TaskState
from console.sdd.tail import JsonlTail
from tests.engine_kit import agent_log, git, make_repo, tasks, ticket

SEED = int(os.environ.get("CRASH_TEST_SEED", "20261122"))


def _engine(root: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--workers", "4", *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _check_invariants(root: Path) -> None:
    for rel in ("runtime/tasks.jsonl", "archive/tasks.jsonl"):
        batch = JsonlTail(root / ".sdd" / rel, rel).read()
        assert batch.problems == [], batch.problems  # no torn or broken record
    for task in tasks(root).values():
        assert task.state is not None, task.status


def test_kill_nine_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    root = make_repo(tmp_path)
    for i in range(1, 31):
        needs = [f"T{i - 5:02}"] if i > 25 else []
        ticket(root, f"t{i:02}", id=f"T{i:02}", title=f"Task {i}", depends_on=needs,
               description=f"sleep rand 0.05 0.4\nwrite out/T{i:02}.txt done {i}",
               completion_signals=[{"type": "path_exists", "path": f"out/T{i:02}.txt"}])
    env = {**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "agent.log"),
           "SPEC_AGENT_LOCKS": str(tmp_path / "locks")}
    kills = 0
    for _ in range(20):
        engine = _engine(root, env)
        time.sleep(rng.uniform(0.2, 1.6))
        if engine.poll() is None:
            engine.send_signal(signal.SIGKILL)
            kills += 1
        engine.wait(timeout=30)
        _check_invariants(root)
    assert kills >= 15

    final = _engine(root, env, "--until-idle")
    assert final.wait(timeout=300) == 0
    _check_invariants(root)
    state = tasks(root)
    assert len(state) == 30
    not_done = {t.id: (t.status, t.result_summary) for t in state.values()
                if t.status != TaskState.DONE.value}
    assert not_done == {}
    for i in range(1, 31):
        assert git(root, "show", f"main:out/T{i:02}.txt") == f"done {i}\n"
        merges = git(root, "log", "--format=%s", "--fixed-strings",
                     f"--grep=Merge bernstein/T{i:02}-", "main").splitlines()
        assert len(merges) == 1, (i, merges)  # completed work neither lost nor redone
    log = agent_log(tmp_path / "agent.log")
    assert [e for e in log if e["event"] == "concurrent"] == []  # never twice at once
    restarts = {e["attempt"] for e in log if e["event"] == "start"}
    assert max(restarts) >= 2  # some task really was interrupted and re-run
