"""End to end: 30 tickets in a real git repo, `run --until-idle --workers 4`, then the controls."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import trusted
from tests.engine_kit import agent_log, assert_idle_exit, git, make_repo, tasks, ticket


def _env(base: Path) -> dict[str, str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    assert shutil.which("codex", path=path) is None, "codex must be absent for this test"
    return {**os.environ, "PATH": path, "SPEC_AGENT_LOG": str(base / "agent.log"),
            "SPEC_AGENT_LOCKS": str(base / "locks")}


def run_cli(root: Path, env: dict[str, str], *args: str, timeout: float = 240):
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("thirty")
    root = make_repo(base)
    with open(root / "bernstein.yaml", "a") as handle:
        handle.write("  timeouts: {small: 1.5}\n"
                     "cascade: {min_observations: 100000}\n")  # no bandit skips here
    (root / "templates" / "roles" / "analyst").mkdir(parents=True)
    (root / "templates" / "roles" / "analyst" / "task_prompt.md").write_text(
        "ANALYST-PROMPT for {{TASK_TITLE}}\n{{TASK_DESCRIPTION}}\n")
    trusted(root)  # its configuration and role templates changed: the operator trusts them
    for i in range(1, 17):
        ticket(root, f"w{i:02}", id=f"W{i:02}", title=f"Write file {i}",
               description=f"sleep rand 0.05 0.3\nwrite out/w{i:02}.txt hello {i}",
               completion_signals=[{"type": "path_exists", "path": f"out/w{i:02}.txt"},
                                   {"type": "file_contains", "path": f"out/w{i:02}.txt",
                                    "contains": f"/^hello {i}$/"}])
    deps = {"D1": ["W01", "W02"], "D2": ["D1"], "D3": ["W03"], "D4": ["D2", "D3"]}
    for name, needs in deps.items():
        ticket(root, name.lower(), id=name, title=f"Dependant {name}", depends_on=needs,
               description=f"write out/{name}.txt after {' '.join(needs)}")
    ticket(root, "f1", id="F1", title="Signal path missing", description="write out/other.txt",
           completion_signals=[{"type": "path_exists", "path": "out/never.txt"}])
    ticket(root, "f2", id="F2", title="Signal needle missing", description="write out/f2.txt abc",
           completion_signals=[{"type": "file_contains", "path": "out/f2.txt",
                                "contains": "xyz"}])
    ticket(root, "f3", id="F3", title="Signal test fails", description="write out/f3.txt",
           completion_signals=[{"type": "test_passes", "command": "test -f out/nope.txt"}])
    ticket(root, "h1", id="H1", title="Hangs", scope="small", description="hang")
    ticket(root, "m1", id="M1", title="Missing adapter", cli="codex", description="write x")
    ticket(root, "e1", id="E1", title="Exits non-zero", description="exit 3")
    ticket(root, "b1", id="B1", title="Needs the one that fails", depends_on=["E1"],
           description="write out/b1.txt")
    ticket(root, "x1", id="X1", title="Slow writer of shared", priority=1,
           description="sleep 1.5\nwrite shared.txt from X1")
    ticket(root, "x2", id="X2", title="Fast writer of shared", priority=1,
           description="write shared.txt from X2")
    ticket(root, "r1", id="R1", title="Custom role", role="analyst",
           description="prompt out/r1-prompt.txt",
           completion_signals=[{"type": "file_contains", "path": "out/r1-prompt.txt",
                                "contains": "ANALYST-PROMPT for Custom role"}])
    env = _env(base)
    result = run_cli(root, env, "run", "--until-idle", "--workers", "4")
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    return root, env


def test_thirty_tickets_end_for_the_right_reasons(project: tuple[Path, dict[str, str]]) -> None:
    root, _env = project
    state = tasks(root)
    assert len(state) == 30
    by_id = {tid: (t.status, t.result_summary or "") for tid, t in state.items()}
    for i in range(1, 17):
        assert by_id[f"W{i:02}"][0] == "done", by_id[f"W{i:02}"]
    for name in ("D1", "D2", "D3", "D4", "R1"):
        assert by_id[name][0] == "done", by_id[name]
    assert by_id["F1"][0] == "failed" and "out/never.txt: does not exist" in by_id["F1"][1]
    assert by_id["F2"][0] == "failed" and "'xyz' not found" in by_id["F2"][1]
    assert by_id["F3"][0] == "failed" and "test_passes" in by_id["F3"][1]
    assert by_id["H1"][0] == "failed" and "timed out after 2 s" in by_id["H1"][1]
    assert by_id["M1"] == ("failed", "adapter codex is not installed (codex not found on PATH)")
    assert by_id["E1"][0] == "failed" and "exited with code 3" in by_id["E1"][1]
    assert by_id["B1"] == ("blocked_by_failed_dep", "dependency E1 is failed")
    shared = sorted([by_id["X1"], by_id["X2"]])
    assert shared[0][0] == "done" and shared[1] == ("failed", "merge conflict in shared.txt")
    assert (root / ".sdd" / "backlog" / "open").exists()
    assert list((root / ".sdd" / "backlog" / "open").iterdir()) == []
    closed = {p.name for p in (root / ".sdd" / "backlog" / "closed").iterdir()}
    assert {"w01.yaml", "f1.yaml", "e1.yaml"} <= closed
    assert "b1.yaml" in {p.name for p in (root / ".sdd" / "backlog" / "claimed").iterdir()}


def test_merged_work_is_on_the_base_branch(project: tuple[Path, dict[str, str]]) -> None:
    root, _env = project
    files = set(git(root, "ls-tree", "-r", "--name-only", "main").split())
    assert {f"out/w{i:02}.txt" for i in range(1, 17)} <= files
    assert {"out/D1.txt", "out/D4.txt", "out/r1-prompt.txt", "shared.txt"} <= files
    assert "out/other.txt" not in files  # F1 failed: nothing merged
    assert git(root, "show", "main:out/w07.txt") == "hello 7\n"
    assert git(root, "status", "--porcelain", "--untracked-files=no").strip() == ""
    assert git(root, "worktree", "list").count("\n") == 1  # worktrees removed


def test_dependants_started_only_after_their_dependencies_were_done(
        project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    state = tasks(root)
    starts = {e["task"]: e["t"] for e in agent_log(Path(env["SPEC_AGENT_LOG"]))
              if e["event"] == "start"}
    deps = {"D1": ["W01", "W02"], "D2": ["D1"], "D3": ["W03"], "D4": ["D2", "D3"]}
    for name, needs in deps.items():
        for need in needs:
            assert state[need].completed_at is not None
            assert starts[name] > state[need].completed_at, (name, need)
    assert "B1" not in starts
    assert not [e for e in agent_log(Path(env["SPEC_AGENT_LOG"])) if e["event"] == "concurrent"]


def test_controls_from_the_cli(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    illegal = run_cli(root, env, "retry", "W01")
    assert illegal.returncode == 1
    assert illegal.stderr.strip() == "task W01 is done; only a failed task can be retried"
    before = tasks(root)["E1"].retry_count
    retried = run_cli(root, env, "retry", "E1")
    assert retried.returncode == 0, retried.stderr
    assert tasks(root)["E1"].status == "open" and tasks(root)["E1"].retry_count == before + 1
    escalated = run_cli(root, env, "escalate", "M1")  # failed on codex's bottom tier
    assert escalated.returncode == 0, escalated.stderr  # (its cli's ladder, #21)
    assert escalated.stdout.strip() == "task M1 reopened on gpt-6.1-sol (was gpt-6-luna)"
    assert tasks(root)["M1"].model == "gpt-6.1-sol" and tasks(root)["M1"].status == "open"
    top = run_cli(root, env, "escalate", "F1")  # the cascade already took it to opus
    assert top.returncode == 1 and "already runs on the top tier (opus)" in top.stderr
    cancelled = run_cli(root, env, "cancel", "B1", "--reason", "not needed")
    assert cancelled.returncode == 0
    assert tasks(root)["B1"].status == "cancelled"
    assert tasks(root)["B1"].result_summary == "not needed"
    refused = run_cli(root, env, "retry", "B1")
    assert refused.returncode == 1 and "cancelled, which is terminal" in refused.stderr
    # the escalated task's next attempt really runs on the next rung
    rerun = run_cli(root, env, "run", "--until-idle", "--workers", "2")
    assert_idle_exit(root, rerun.returncode, rerun.stdout + rerun.stderr)
    chain = tasks(root)["M1"].metadata["last_chain"]
    assert chain[0]["model"] == "gpt-6.1-sol"
