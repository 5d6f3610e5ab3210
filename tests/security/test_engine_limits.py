"""#15 part 5 (regex and pid files): nothing from data can stall the engine or stop it.
A catastrophic `file_contains` regex fails its signal with one line while the engine
carries on; a runtime/server.pid naming a process that is not Bernstein (pid 1, the
operator's shell, any `sleep`) or a FIFO does not stop or hang the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.engine.orphans import proc_start_ticks
from tests.engine_kit import assert_idle_exit, make_repo, tasks, ticket


def _run(root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "agent.log")}
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                           "--until-idle"], capture_output=True, text=True, env=env,
                          timeout=240)


def test_a_catastrophic_regex_fails_its_signal_and_the_engine_carries_on(tmp_path: Path
                                                                         ) -> None:
    root = make_repo(tmp_path, config="cascade: {enabled: false}\n")
    evil = "a" * 4000 + "!"  # (a+)+$ backtracks exponentially on it
    ticket(root, "r1", id="R1", title="Catastrophic pattern", max_retries=0,
           description=f"write big.txt {evil}",
           completion_signals=[{"type": "file_contains", "path": "big.txt",
                                "contains": "/(a+)+$/"}])
    ticket(root, "r2", id="R2", title="Invalid pattern", max_retries=0,
           description="write small.txt hello",
           completion_signals=[{"type": "file_contains", "path": "small.txt",
                                "contains": "/(unclosed/"}])
    ticket(root, "r3", id="R3", title="Glob that walks the tree again and again",
           max_retries=0, description="write deep/a/b/c/x.txt hello",
           completion_signals=[{"type": "glob_exists", "value": "**/**/**/**/x.txt"}])
    ticket(root, "ok", id="OK", title="Ordinary work after it", depends_on=["R1"],
           description="write fine.txt hello 1",
           completion_signals=[{"type": "file_contains", "path": "fine.txt",
                                "contains": "/^hello \\d$/"}])
    run = _run(root, tmp_path)
    assert_idle_exit(root, run.returncode, run.stdout + run.stderr)
    state = tasks(root)
    for task_id, reason in (("R1", "took longer than 2 s"),
                            ("R2", "is not a valid regular expression"),
                            ("R3", "more than 2 '**' parts")):
        task = state[task_id]
        assert task.status == "failed", (task.status, task.result_summary)
        assert reason in (task.result_summary or ""), task.result_summary
    assert "Traceback" not in run.stdout + run.stderr
    # R1 failing blocks OK (its dependency); a retried R1 would say otherwise
    assert state["OK"].status == "blocked_by_failed_dep", state["OK"].status


def test_good_regex_signal_still_passes(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    ticket(root, "ok", id="OK", title="Ordinary work",
           description="write fine.txt hello 7",
           completion_signals=[{"type": "file_contains", "path": "fine.txt",
                                "contains": "/^hello (?=\\d)\\d$/"}])  # lookahead: not RE2
    run = _run(root, tmp_path)
    assert_idle_exit(root, run.returncode, run.stdout + run.stderr)
    assert tasks(root)["OK"].status == "done", tasks(root)["OK"].result_summary


@pytest.mark.parametrize("holder", ["sleep", "pid 1", "parent shell", "fifo"])
def test_a_pid_file_that_is_not_bernstein_does_not_stop_the_engine(tmp_path: Path,
                                                                   holder: str) -> None:
    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Work", description="write out.txt done",
           completion_signals=[{"type": "path_exists", "path": "out.txt"}])
    pid_file = root / ".sdd" / "runtime" / "server.pid"
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        if holder == "fifo":  # reading it would block forever
            os.mkfifo(pid_file)
        else:
            pid = {"sleep": sleeper.pid, "pid 1": 1, "parent shell": os.getppid()}[holder]
            pid_file.write_text(f"{pid}\n")
            (root / ".sdd" / "runtime" / "spawner.pid").write_text(f"{pid}\n")
        run = _run(root, tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "run by a live bernstein" not in run.stdout + run.stderr
    assert tasks(root)["T1"].status == "done"


def test_a_planted_agent_pid_file_kills_nothing_the_engine_did_not_start(tmp_path: Path
                                                                         ) -> None:
    """runtime/pids/*.json is data too: naming a live process of the operator's (right
    pid, right start time) must not get it killed as a dead engine's agent."""
    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Work", description="write out.txt done")
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks = proc_start_ticks(bystander.pid)
        pids = root / ".sdd" / "runtime" / "pids"
        pids.mkdir(parents=True, exist_ok=True)
        (pids / "planted.json").write_text(json.dumps(
            {"pgid": bystander.pid, "start_ticks": ticks, "session": "s", "task_id": "T1"}))
        run = _run(root, tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        assert bystander.poll() is None, "the engine killed a process it never started"
    finally:
        bystander.kill()
        bystander.wait()
    assert tasks(root)["T1"].status == "done"
