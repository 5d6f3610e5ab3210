"""Missions and phase quality gates with a real engine and a local LLM endpoint for reviews."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.sdd.tail import JsonlTail
from tests.engine_kit import assert_idle_exit, make_repo, tasks, ticket
from tests.llm_server import llm_server, system_of


def _run(root: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle", "--workers", "2"], capture_output=True, text=True,
                            timeout=300)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)


def _judges(score: float):
    def answer(body: dict, number: int) -> tuple[int, str]:
        if "messages" not in body:  # the gate's webhook
            return 200, "received"
        if "Score each dimension" not in system_of(body):
            return 500, "unexpected"
        return 200, json.dumps({"scores": [
            {"dimension": d, "score": score, "reasoning": "ok"}
            for d in ("correctness", "completeness", "code_quality", "edge_cases")]})
    return answer


MISSION = """
missions:
  - name: feature-x
    qualityThreshold: {threshold}
    tasks: [A, B, C, "Deploy to staging"]
    qualityGates:
      - name: code-review
        afterTasks: [A, "Write the tests"]
        blocksTasks: [C]
        minScore: {min_score}
        requireAllPassed: true
        notifyChannels: [console, "{hook}"]
"""


def _project(tmp_path: Path, url: str, min_score: float, threshold: float = 3.0) -> Path:
    config = f"llm: {{base_url: '{url}', model: judge}}\n" + MISSION.format(
        min_score=min_score, threshold=threshold, hook=url.replace("/v1", "/hook"))
    root = make_repo(tmp_path, config=config)
    for tid, title in (("A", "Implement core module"), ("B", "Write the tests")):
        ticket(root, tid.lower(), id=tid, title=title, scope="small", complexity="low",
               require_review=True, description=f"write out/{tid}.txt {tid}")
    ticket(root, "c", id="C", title="Integration testing", scope="small", complexity="low",
           description="write out/C.txt C")
    return root


def _phase(root: Path) -> list[dict]:
    return [r for _, r in JsonlTail(root / ".sdd/metrics/phase_gates.jsonl").read().records]


def test_a_phase_gate_holds_then_releases(tmp_path: Path) -> None:
    with llm_server(_judges(4)) as (url, seen):
        root = _project(tmp_path, url, min_score=4.0)
        _run(root)
    hooks = [body for body in seen if body.get("event")]
    assert [(h["event"], h["gate_name"]) for h in hooks] == [("quality:gate:passed",
                                                              "code-review")]
    events = (root / ".sdd/runtime/engine_events.jsonl").read_text()
    assert "webhook" not in events  # delivered, no failure logged
    state = tasks(root)
    assert {tid: state[tid].status for tid in "ABC"} == {"A": "done", "B": "done", "C": "done"}
    history = [(r["status"], r["metadata"].get("held_by")) for _, r in
               JsonlTail(root / ".sdd/runtime/tasks.jsonl").read().records if r["id"] == "C"]
    assert history[0] == ("blocked", "code-review")  # held from its creation
    assert ("open", None) in history
    assert state["C"].claimed_at > max(state["A"].completed_at, state["B"].completed_at)
    [passed] = _phase(root)
    assert (passed["event"], passed["gate_name"], passed["avg_score"]) == (
        "quality:gate:passed", "code-review", 4.0)


def _status(root: Path) -> dict:
    return json.loads(subprocess.run([sys.executable, "-m", "console", "-C", str(root),
                                      "status", "--json"], capture_output=True,
                                     text=True).stdout)


def test_a_failed_phase_gate_halts_its_mission_until_released(tmp_path: Path) -> None:
    """#20.5: a failed gate halts the mission (its blocksTasks and every task of it not
    started, a ticket that comes later included), says so in `status --json` `missions`,
    and an explicit release (recorded, with who and why) lets them run."""
    with llm_server(_judges(3)) as (url, _seen):
        root = _project(tmp_path, url, min_score=4.0, threshold=3.5)
        _run(root)
        state = tasks(root)
        halted = ("blocked: mission feature-x halted: phase gate 'code-review' failed: "
                  "average review score 3.0 is below minScore 4.0 (release the gate to go on)")
        assert state["C"].status == "blocked" and state["C"].result_summary == halted
        [failed] = _phase(root)
        assert failed["event"] == "quality:gate:failed" and failed["avg_score"] == 3.0
        ticket(root, "d", id="D", title="Deploy to staging", description="write out/D.txt D")
        _run(root)  # a task of the halted mission that came later is held too
        assert tasks(root)["D"].status == "blocked"
        assert tasks(root)["D"].metadata.get("held_by") == "code-review"
        summary = _status(root)
        assert summary["problems"] == []
        [mission] = summary["missions"]
        assert (mission["id"], mission["state"], mission["halted_by"]) == (
            "feature-x", "halted", "code-review")
        assert mission["done"] == 2 and mission["total"] == 4
        [gate] = mission["gates"]
        assert (gate["status"], gate["avg_score"], gate["blocks"]) == ("failed", 3.0, ["C"])
        quality = summary["quality"]
        assert quality["missions"]["feature-x"]["total_assessments"] == 2
        assert quality["missions"]["feature-x"]["avg_score"] == 3.0
        assert quality["tasks"]["A"]["total_assessments"] == 1
        assert any(agent.startswith("backend/") for agent in quality["agents"])
        no_reason = subprocess.run([sys.executable, "-m", "console", "-C", str(root),
                                    "release-gate", "feature-x", "code-review"],
                                   capture_output=True, text=True)
        assert no_reason.returncode == 2  # --reason is required
        wrong = subprocess.run([sys.executable, "-m", "console", "-C", str(root),
                                "release-gate", "feature-x", "nope", "--reason", "x"],
                               capture_output=True, text=True)
        assert wrong.returncode == 1 and "no phase gate 'nope'" in wrong.stderr
        released = subprocess.run([sys.executable, "-m", "console", "-C", str(root),
                                   "release-gate", "feature-x", "code-review", "--reason",
                                   "scores are fine for a prototype"],
                                  capture_output=True, text=True)
        assert released.returncode == 0, released.stderr
        assert "released by operator: scores are fine for a prototype" in released.stdout
        _run(root)
    state = tasks(root)
    assert state["C"].status == "done" and state["D"].status == "done"
    [record] = [r for r in _phase(root) if r["event"] == "quality:gate:released"]
    assert (record["event"], record["by"], record["reason"]) == (
        "quality:gate:released", "operator", "scores are fine for a prototype")
    again = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "release-gate",
                            "feature-x", "code-review", "--reason", "twice"],
                           capture_output=True, text=True)
    assert again.returncode == 1 and "already released" in again.stderr
    assert _status(root)["missions"][0]["gates"][0]["status"] == "released"
