"""#20.7: Polpo's quality metrics from what a project records — per task, agent and
mission: assessments and their scores, fix attempts (same model again) and retries,
deadlines met and missed."""

from __future__ import annotations

from pathlib import Path

from console.sdd.quality_metrics import quality_metrics
from console.sdd.source import LocalSource
from tests.conftest import append, task_record


def _attempt(model: str, number: int, success: bool) -> dict:
    return {"model": model, "attempt_number": number, "success": success}


def test_metrics_per_task_agent_and_mission(project: Path) -> None:
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl",
           task_record("A", "done", retry_count=2, model="sonnet"),
           task_record("B", "done", role="qa", model="haiku"))
    append(sdd / "metrics" / "cascade_chains.jsonl", {
        "chain_id": "c1", "task_id": "A", "role": "backend", "succeeded": True,
        "attempts": [_attempt("haiku", 1, False), _attempt("haiku", 2, False),
                     _attempt("sonnet", 3, True)]})
    append(sdd / "metrics" / "reviews.jsonl",
           {"task_id": "A", "global_score": 4.5, "passed": True,
            "merged": {"correctness": 5.0, "edge_cases": 4.0}},
           {"task_id": "A", "global_score": 2.5, "passed": False,
            "merged": {"correctness": 3.0, "edge_cases": 2.0}},
           {"task_id": "B", "global_score": 4.0, "passed": True, "merged": {}})
    append(sdd / "metrics" / "sla_events.jsonl",
           {"event": "sla:violated", "entity_id": "A", "entity_type": "task",
            "deadline": 1.0, "timestamp": 2.0},
           {"event": "sla:met", "entity_id": "B", "entity_type": "task",
            "deadline": 5.0, "timestamp": 2.0})
    source = LocalSource(project)
    source.load()
    assert source.state.problems == []
    metrics = quality_metrics(source.state, {"m1": ["A", "B"]})
    a = metrics["tasks"]["A"]
    assert (a["total_assessments"], a["passed_assessments"]) == (2, 1)
    assert (a["avg_score"], a["min_score"], a["max_score"]) == (3.5, 2.5, 4.5)
    assert a["dimension_scores"] == {"correctness": 4.0, "edge_cases": 3.0}
    assert (a["total_fixes"], a["total_retries"]) == (1, 1)  # haiku again, then sonnet
    assert (a["deadlines_met"], a["deadlines_missed"]) == (0, 1)
    assert set(metrics["agents"]) == {"backend/sonnet", "qa/haiku"}
    mission = metrics["missions"]["m1"]
    assert (mission["tasks"], mission["total_assessments"], mission["avg_score"]) == (
        2, 3, round((4.5 + 2.5 + 4.0) / 3, 3))
    assert (mission["deadlines_met"], mission["deadlines_missed"]) == (1, 1)
