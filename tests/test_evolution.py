"""Evolution proposals: analysis, Bernstein's records, approve/reject through the gate."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path

from console.engine.evolution import (
    Proposal,
    analyse,
    classify,
    decide,
    record_proposal,
    unified_diff,
)
from console.engine.evolution_apply import EvolutionConfig, file_guard
from console.sdd.fileio import append_jsonl
from console.sdd.paths import SddPaths
from console.sdd.tail import JsonlTail
from tests.conftest import trusted
from tests.engine_kit import git

CONFIG = """\
quality_gates:
  lint: true
evolution:
  test_command: python -m pytest -q -p no:cacheprovider
  benchmark_command: cat score.txt
  evals:
    smoke: test -f README.md
    configured: grep -q auto_format bernstein.yaml
"""


def make_project(base: Path) -> Path:
    root = base / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "README.md").write_text("# demo\n")
    (root / "score.txt").write_text("score 10\n")
    (root / "bernstein.yaml").write_text(CONFIG)
    (root / "tests" / "test_config.py").write_text(
        "import pathlib\n\n\ndef test_config_is_yaml():\n"
        "    assert 'quality_gates' in pathlib.Path('bernstein.yaml').read_text()\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init")
    subprocess.run([sys.executable, "-m", "console", "-C", str(root), "init"], check=True,
                   capture_output=True)
    return trusted(root)  # init does not trust a bernstein.yaml it did not write


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=300)


def lines(root: Path, rel: str) -> list[dict]:
    return [r for _, r in JsonlTail(root / ".sdd" / rel).read().records]


def test_risk_and_decisions_follow_bernstein() -> None:
    assert classify(()) == 2
    assert classify(("src/app.py",)) == 3 and classify(("pyproject.toml",)) == 3
    assert classify(("templates/roles/qa/system_prompt.md",)) == 1
    assert classify((".sdd/config/providers.yaml",)) == 0
    assert classify((".sdd/config/routing.yaml",)) == 2
    assert classify(("bernstein.yaml",)) == 2
    assert decide(3, 0.99)[0] == "blocked"
    assert [decide(2, c)[0] for c in (0.9, 0.5)] == ["human_review_4h",
                                                     "human_review_immediate"]
    assert [decide(1, c)[0] for c in (0.96, 0.9, 0.75, 0.5)] == [
        "auto_approved", "auto_approved_audit", "human_review_4h", "human_review_immediate"]


def test_file_guard() -> None:
    allowed = ("bernstein.yaml", "templates/")
    ok = unified_diff("templates/roles/qa/config.yaml", "", "model: sonnet\n")
    assert file_guard(ok, allowed) == []
    assert "src/app.py is not among the paths" in file_guard(
        unified_diff("src/app.py", "x\n", "y\n"), allowed)[0]
    assert file_guard("--- a/../etc/passwd\n+++ b/../etc/passwd\n", allowed) == [
        "../etc/passwd is outside the repository"]
    assert file_guard("--- a/.git/config\n+++ b/.git/config\n", allowed) == [
        ".git/config is inside .git"]


def _lint_failures(root: Path, count: int) -> None:
    append_jsonl(root / ".sdd/metrics/quality_gates.jsonl", [
        {"timestamp": "2026-11-22T00:00:00+00:00", "task_id": f"t{i}", "gate": "lint",
         "result": "blocked", "status": "fail", "duration_ms": 5, "cached": False,
         "required": True} for i in range(count)])


def test_evolve_defers_an_l2_proposal_that_approve_merges(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _lint_failures(root, 4)
    evolved = cli(root, "evolve")
    assert evolved.returncode == 0, evolved.stderr
    assert "human_review_4h" in evolved.stdout and "Format changes before linting" in \
        evolved.stdout
    [decision] = lines(root, "evolution/decisions.jsonl")
    [deferred] = lines(root, "evolution/deferred.jsonl")
    assert (decision["risk_level"], decision["outcome"], decision["requires_human"],
            decision["reviewer"]) == ("logic", "human_review_4h", True, None)
    assert deferred["target_files"] == ["bernstein.yaml"] and deferred["risk_level"] == "L2"
    assert "+  auto_format: true" in deferred["diff"]
    assert cli(root, "evolve").stdout.startswith("no new proposals")  # not twice
    pid = deferred["proposal_id"]
    listed = json.loads(cli(root, "proposals", "--json").stdout)
    assert [(p["proposal_id"], p["pending"]) for p in listed] == [(pid, True)]

    approved = cli(root, "approve", pid, "--reason", "yes")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "merged into main" in approved.stdout
    assert "auto_format: true" in git(root, "show", "main:bernstein.yaml")
    last = lines(root, "evolution/decisions.jsonl")[-1]
    assert (last["outcome"], last["requires_human"], last["reviewer"]) == (
        "auto_approved", False, getpass.getuser())
    assert last["reason"] == f"Manually approved by {getpass.getuser()}: yes; merged"
    experiment = lines(root, "evolution/experiments.jsonl")[-1]
    assert experiment["accepted"] is True
    assert [s["step"] for s in experiment["steps"]] == [
        "file_guard", "apply", "file_guard_applied", "tests", "eval_suite", "benchmark",
        "merge", "promotion"]
    # no best score before this one: no baseline and no delta (Bernstein reads a null
    # delta with float(), so an unknown one is left out, never written as null)
    assert experiment["candidate_score"] == 10.0
    assert "baseline_score" not in experiment and "delta" not in experiment
    assert "promoted configured, smoke" in experiment["steps"][-1]["detail"]
    suite = json.loads((root / ".sdd/evolution/suite.json").read_text())
    assert suite["tasks"] == ["configured", "smoke"]
    untrusted = cli(root, "approve", pid)  # the merge changed bernstein.yaml: trust again
    assert untrusted.returncode == 2 and "bernstein.yaml changed since you trusted it" in \
        untrusted.stderr
    trusted(root)
    again = cli(root, "approve", pid)
    assert again.returncode == 1 and "is not pending: it was already decided" in again.stderr
    assert json.loads(cli(root, "status", "--json").stdout)["proposals"]["pending"] == 0


def _propose(root: Path, title: str, rel: str, after: str) -> str:
    before = (root / rel).read_text() if (root / rel).exists() else ""
    proposal = Proposal(f"EVO-test-{abs(hash(title)) % 10**8}", title, "policy_update",
                        "because", 0.8, (rel,), unified_diff(rel, before, after))
    record_proposal(SddPaths(root), proposal, "human_review_4h", "L2 — human review")
    return proposal.proposal_id


def test_a_breaking_diff_is_approved_but_not_merged_and_rejects_and_guards(tmp_path) -> None:
    root = make_project(tmp_path)
    breaking = _propose(root, "Drop the gates", "bernstein.yaml", "evolution: {}\n")
    result = cli(root, "approve", breaking)
    assert result.returncode == 1
    assert "approved" in result.stderr and "not merged: tests failed in the sandbox" in \
        result.stderr
    assert git(root, "show", "main:bernstein.yaml") == CONFIG  # unchanged
    experiment = lines(root, "evolution/experiments.jsonl")[-1]
    assert experiment["accepted"] is False and experiment["steps"][-1]["step"] == "tests"
    assert "test_config_is_yaml" in experiment["steps"][-1]["detail"]
    assert lines(root, "evolution/decisions.jsonl")[-1]["requires_human"] is True  # pending

    guarded = _propose(root, "Touch the code", "src/app.py", "print('hi')\n")
    refused = cli(root, "approve", guarded)
    assert refused.returncode == 1 and "refused by the file guard" in refused.stderr
    assert not (root / "src").exists()

    rejected_id = _propose(root, "Something else", "bernstein.yaml", CONFIG + "# note\n")
    no_reason = cli(root, "reject", rejected_id)
    assert no_reason.returncode == 2
    rejected = cli(root, "reject", rejected_id, "--reason", "not this quarter")
    assert rejected.returncode == 0 and "not this quarter" in rejected.stdout
    last = lines(root, "evolution/decisions.jsonl")[-1]
    assert last["reason"].endswith("not this quarter") and last["requires_human"] is False
    listed = {p["proposal_id"]: p for p in json.loads(cli(root, "proposals", "--json").stdout)}
    assert listed[rejected_id]["outcome"] == "rejected" and not listed[rejected_id]["pending"]


def test_a_lower_benchmark_score_is_refused_at_step_two(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    first = _propose(root, "Better", "bernstein.yaml", CONFIG + "# better\n")
    assert cli(root, "approve", first).returncode == 0  # best so far: 10
    trusted(root)  # the approved change is a change to bernstein.yaml: trusted again
    (root / "score.txt").write_text("score 7\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "slower")
    worse = _propose(root, "Worse", "bernstein.yaml",
                     (root / "bernstein.yaml").read_text() + "# worse\n")
    result = cli(root, "approve", worse)
    assert result.returncode == 1 and "benchmark: score 7.0 vs best 10.0" in result.stderr
    steps = lines(root, "evolution/experiments.jsonl")[-1]["steps"]
    assert steps[-1] == {"step": "benchmark", "passed": False,
                         "detail": "score 7.0 vs best 10.0"}


def test_analysis_sees_roles_that_fail(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    chains = [{"timestamp": 1.0, "chain_id": f"c{i}", "task_id": f"t{i}", "role": "qa",
               "attempts": [{"model": "haiku", "success": False, "latency_s": 1.0,
                             "escalation_reason": "tests failed"}],
               "final_model": "haiku", "succeeded": False} for i in range(4)]
    append_jsonl(root / ".sdd/metrics/cascade_chains.jsonl", chains)
    proposals = {p.category: p for p in analyse(SddPaths(root))}
    assert proposals["role_templates"].target_files == (
        "templates/roles/qa/system_prompt.md",)
    assert proposals["role_templates"].risk == 1
    assert proposals["model_routing"].diff.endswith("+model: sonnet\n")
    assert EvolutionConfig().allowed_paths[-1] == "templates/"


def test_the_guard_checks_what_the_patch_really_touches(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    sneaky = ("--- /dev/null\n+++ templates/src/evil.py\n@@ -0,0 +1 @@\n+print('evil')\n")
    proposal = Proposal("EVO-sneaky", "Sneaky", "role_templates", "r", 0.8,
                        ("templates/src/evil.py",), sneaky)
    record_proposal(SddPaths(root), proposal, "human_review_4h", "review")
    result = cli(root, "approve", "EVO-sneaky")
    assert result.returncode == 1
    assert "refused by the file guard after applying: src/evil.py is not among" in result.stderr
    assert "src/evil.py" not in git(root, "ls-tree", "-r", "--name-only", "main")
    assert not (root / ".sdd" / "sandboxes" / "EVO-sneaky").exists()


def test_approve_through_a_running_engine_does_not_stop_its_work(tmp_path: Path) -> None:
    import os
    import time

    from tests.engine_kit import SPEC_AGENT, tasks, ticket

    root = make_project(tmp_path)
    with open(root / "bernstein.yaml", "a") as handle:
        handle.write(f"agents:\n  script:\n    command: [{json.dumps(sys.executable)}, "
                     f"{json.dumps(str(SPEC_AGENT))}]\ncascade: {{enabled: false}}\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "agent")
    trusted(root)
    pid = _propose(root, "Via the engine", "bernstein.yaml",
                   (root / "bernstein.yaml").read_text() + "# via the engine\n")
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "SPEC_AGENT_LOG": str(tmp_path / "a.log")})
    try:
        from console.engine.lock import engine_owner

        deadline = time.monotonic() + 30
        while engine_owner(SddPaths(root)) is None:  # the engine holds the project
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ticket(root, "work", id="W", title="Work meanwhile", description="write out/w.txt w")
        approved = cli(root, "approve", pid)
        assert approved.returncode == 0, approved.stdout + approved.stderr
        assert "# via the engine" in git(root, "show", "main:bernstein.yaml")
        while tasks(root).get("W") is None or tasks(root)["W"].status != "done":
            assert time.monotonic() < deadline + 30
            time.sleep(0.1)
    finally:
        engine.terminate()
        engine.wait(timeout=30)
