"""The embedded demo, headless to idle: every situation it promises, checked from .sdd/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.sdd.tail import JsonlTail
from tests.engine_kit import assert_idle_exit, git, tasks


def records(root: Path, rel: str) -> list[dict]:
    return [r for _, r in JsonlTail(root / ".sdd" / rel).read().records]


def test_the_demo_shows_everything_it_promises(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    made = subprocess.run([sys.executable, "-m", "console", "demo", str(root)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    again = subprocess.run([sys.executable, "-m", "console", "demo", str(root)],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "is not empty" in again.stderr
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle", "--workers", "3"], capture_output=True, text=True,
                         timeout=600)
    assert_idle_exit(root, run.returncode, run.stdout + run.stderr)
    state = tasks(root)
    chains = {c["task_id"]: c for c in records(root, "metrics/cascade_chains.jsonl")}

    def models(tid: str) -> list[str]:
        return [a["model"] for a in chains[tid]["attempts"]]

    assert state["DEMO-01"].status == "done" and models("DEMO-01") == ["haiku"]  # first time
    assert state["DEMO-02"].status == "done" and models("DEMO-02") == ["haiku", "sonnet"]
    assert "lint fail" in chains["DEMO-02"]["attempts"][0]["escalation_reason"]
    assert any(r["task_id"] == "DEMO-02" for r in records(root, "metrics/reflections.jsonl"))
    assert state["DEMO-03"].status == "done"
    assert models("DEMO-03") == ["haiku", "sonnet", "opus"]  # tests failed twice
    assert state["DEMO-04"].status == "failed" and models("DEMO-04") == ["haiku", "sonnet",
                                                                         "opus"]
    assert chains["DEMO-04"]["succeeded"] is False  # the ladder is exhausted
    assert state["DEMO-05"].status == "blocked_by_failed_dep"
    assert state["DEMO-05"].result_summary == "dependency DEMO-04 is failed"
    sla = [(r["entity_id"], r["event"]) for r in records(root, "metrics/sla_events.jsonl")]
    assert ("DEMO-06", "sla:warning") in sla and ("DEMO-06", "sla:violated") in sla
    assert ("DEMO-07", "sla:met") in sla
    history = [r["status"] for r in records(root, "runtime/tasks.jsonl") if r["id"] == "DEMO-08"]
    assert history[0] == "blocked" and state["DEMO-08"].status == "done"  # held, released
    assert state["DEMO-08"].claimed_at > state["DEMO-02"].completed_at
    [gate] = records(root, "metrics/phase_gates.jsonl")
    assert gate["event"] == "quality:gate:passed" and gate["gate_name"] == "core-ready"
    [proposal] = records(root, "evolution/deferred.jsonl")
    assert proposal["risk_level"] == "L2" and proposal["target_files"] == ["bernstein.yaml"]
    approved = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "approve",
                               proposal["proposal_id"]], capture_output=True, text=True,
                              timeout=300)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "auto_format: true" in git(root, "show", "main:bernstein.yaml")
    summary = json.loads(subprocess.run(
        [sys.executable, "-m", "console", "-C", str(root), "status", "--json"],
        capture_output=True, text=True).stdout)
    assert summary["problems"] == [] and summary["proposals"]["pending"] == 0
