"""Approved proposals change behaviour (#20.3), one test per kind the engine emits, each
before and after, on a real engine run with the spec agent; a failed approval stays
pending and can be approved again (#20.4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.sdd.fileio import append_jsonl
from console.sdd.project_config import load_config
from tests.conftest import trusted
from tests.engine_kit import agent_log, git, make_repo, ticket


def cli(root: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _history(root: Path) -> None:
    """Metrics that make the engine propose each kind: qa chains failing on haiku and
    slow, lint failing often."""
    append_jsonl(root / ".sdd/metrics/cascade_chains.jsonl", [
        {"task_id": f"old{i}", "role": "qa", "succeeded": False, "attempts": [
            {"model": "haiku", "success": False, "latency_s": 1700,
             "escalation_reason": "janitor failed: tests"}]} for i in range(5)])
    append_jsonl(root / ".sdd/metrics/quality_gates.jsonl", [
        {"timestamp": "2026-11-22T00:00:00+00:00", "task_id": f"old{i}", "gate": "lint",
         "result": "blocked", "status": "fail", "duration_ms": 5, "cached": False,
         "required": True} for i in range(4)])


def _run_qa(root: Path, base: Path, name: str) -> tuple[str, str, list[str]]:
    """(first model, prompt, gates run) of a fresh qa task."""
    log = base / f"{name}.jsonl"
    ticket(root, name, id=name, title=f"qa work {name}", role="qa",
           description=f"prompt {base}/{name}-prompt.txt\nwrite {name}.txt done")
    result = cli(root, "run", "--until-idle", env={"SPEC_AGENT_LOG": str(log)})
    assert result.returncode == 0, result.stdout + result.stderr
    first = agent_log(log)[0]["model"]
    report = json.loads((root / ".sdd/runtime/gates" / f"{name}.json").read_text())
    return first, (base / f"{name}-prompt.txt").read_text(), \
        [r["name"] for r in report["results"]]


def test_each_approved_proposal_kind_changes_the_next_task(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    git(root, "add", "bernstein.yaml")
    git(root, "commit", "-qm", "config")
    _history(root)
    model, prompt, gates = _run_qa(root, tmp_path, "QA-1")
    assert model == "haiku" and "Lessons from failed attempts" not in prompt
    assert "auto_format" not in gates
    assert load_config(root).agents.timeouts["medium"] != 3600

    evolved = cli(root, "evolve")
    assert evolved.returncode == 0, evolved.stderr
    trusted(root)  # evolve changed a role template (trusted since #32): trusted again
    listed = {p["title"]: p for p in json.loads(cli(root, "proposals", "--json").stdout)}
    # role_templates: L1 at 0.9 confidence, applied by evolve itself (with audit)
    assert [(p["outcome"], p["reason"].endswith("merged")) for p in listed.values()
            if p["risk_level"] == "template"] == [("auto_approved_audit", True)]
    for title in ("Start qa tasks on sonnet", "Format changes before linting",
                  "Give qa agents more time"):
        assert listed[title]["pending"], title
        approved = cli(root, "approve", listed[title]["proposal_id"])
        assert approved.returncode == 0, approved.stdout + approved.stderr
        trusted(root)  # bernstein.yaml changed: the operator trusts what they approved

    model, prompt, gates = _run_qa(root, tmp_path, "QA-2")
    assert model == "sonnet"  # model_routing: the role's config.yaml now starts it there
    assert "Lessons from failed attempts" in prompt  # role_templates
    assert "janitor failed: tests" in prompt
    assert gates[0] == "auto_format"  # policy_update: quality_gates.auto_format
    assert load_config(root).agents.timeouts["medium"] == 3600  # policy_update: timeouts
    chain = json.loads((root / ".sdd/metrics/cascade_chains.jsonl").read_text()
                       .splitlines()[-1])
    assert "role qa configured to start on sonnet" in chain["attempts"][0]["route_reason"]


def test_a_failed_approval_stays_pending_and_can_be_approved_again(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="evolution:\n  test_command: test -f ready.flag\n")
    append_jsonl(root / ".sdd/metrics/quality_gates.jsonl", [
        {"timestamp": "2026-11-22T00:00:00+00:00", "task_id": f"old{i}", "gate": "lint",
         "result": "blocked", "status": "fail", "duration_ms": 5, "cached": False,
         "required": True} for i in range(4)])
    git(root, "add", "bernstein.yaml")
    git(root, "commit", "-qm", "config")
    assert cli(root, "evolve").returncode == 0
    [proposal] = json.loads(cli(root, "proposals", "--json").stdout)
    pid = proposal["proposal_id"]

    failed = cli(root, "approve", pid)
    assert failed.returncode == 1
    assert "not merged: tests failed in the sandbox" in failed.stderr
    assert "stays pending" in failed.stderr
    [after] = json.loads(cli(root, "proposals", "--json").stdout)
    assert after["pending"] is True  # was: auto_approved, accepted=false, no longer pending
    assert after["reason"].startswith(f"Approval by {after['reviewer']} failed; not merged")
    assert "auto_format" not in git(root, "show", "main:bernstein.yaml")

    (root / "ready.flag").write_text("fixed\n")  # the cause, fixed
    git(root, "add", "ready.flag")
    git(root, "commit", "-qm", "ready")
    again = cli(root, "approve", pid)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "auto_format: true" in git(root, "show", "main:bernstein.yaml")
    [done] = json.loads(cli(root, "proposals", "--json").stdout)
    assert done["pending"] is False and done["outcome"] == "auto_approved"
