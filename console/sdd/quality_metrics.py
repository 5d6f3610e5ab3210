"""Polpo's quality metrics (seed 003, QualityController): per task, per agent (role and
model) and per mission — assessments run and passed, average, min and max score,
per-dimension averages, retries and fix attempts consumed, deadlines met and missed.

From what the project records: an assessment is a review (metrics/reviews.jsonl); a fix
attempt is a further attempt on the same model after a failed one (the cascade's "retry
on this tier" with the failure as feedback, an AutoFixer pass included); the retries are
the task's `retry_count` (every further attempt, Bernstein's count: escalations and
operator retries) less its fix attempts;
deadlines from the SLA verdicts (sla:met / sla:violated). The agent of a task is its role
and the model of its last attempt.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console.records import Chain
from console.sdd.state import State


@dataclass
class Metrics:
    assessments: int = 0
    passed: int = 0
    scores: list[float] = field(default_factory=list)
    dimensions: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    retries: int = 0
    fixes: int = 0
    deadlines_met: int = 0
    deadlines_missed: int = 0
    tasks: int = 0

    def add(self, other: Metrics) -> None:
        self.assessments += other.assessments
        self.passed += other.passed
        self.scores.extend(other.scores)
        for name, values in other.dimensions.items():
            self.dimensions[name].extend(values)
        self.retries += other.retries
        self.fixes += other.fixes
        self.deadlines_met += other.deadlines_met
        self.deadlines_missed += other.deadlines_missed
        self.tasks += other.tasks

    def as_dict(self) -> dict[str, Any]:
        def avg(values: list[float]) -> float | None:
            return round(sum(values) / len(values), 3) if values else None

        return {
            "tasks": self.tasks,
            "total_assessments": self.assessments, "passed_assessments": self.passed,
            "avg_score": avg(self.scores),
            "min_score": min(self.scores) if self.scores else None,
            "max_score": max(self.scores) if self.scores else None,
            "dimension_scores": {name: avg(values)
                                 for name, values in sorted(self.dimensions.items())},
            "total_retries": self.retries, "total_fixes": self.fixes,
            "deadlines_met": self.deadlines_met, "deadlines_missed": self.deadlines_missed,
        }


def _attempts(chain: Chain | None) -> tuple[int, int]:
    """(fixes, escalations) in a chain: further attempts on the same model, on another."""
    if chain is None:
        return 0, 0
    fixes = escalations = 0
    for before, after in zip(chain.attempts, chain.attempts[1:], strict=False):
        if after.model == before.model:
            fixes += 1
        else:
            escalations += 1
    return fixes, escalations


def task_metrics(state: State, task_id: str) -> Metrics:
    metrics = Metrics(tasks=1)
    for review in state.reviews.get(task_id, ()):
        metrics.assessments += 1
        metrics.passed += int(review.passed)
        if review.global_score is not None:
            metrics.scores.append(review.global_score)
        for dimension, score in review.merged.items():
            metrics.dimensions[dimension].append(score)
    fixes, escalations = _attempts(state.last_chain.get(task_id))
    task = state.tasks.get(task_id)
    metrics.fixes = fixes
    metrics.retries = max(task.retry_count - fixes, escalations) if task is not None \
        else escalations
    verdict = state.sla_latest.get(task_id)
    if verdict is not None and verdict.event == "sla:met":
        metrics.deadlines_met = 1
    elif verdict is not None and verdict.event == "sla:violated":
        metrics.deadlines_missed = 1
    return metrics


def agent_of(state: State, task_id: str) -> str:
    """role/model of the task's last attempt (its pinned or current model before any)."""
    task = state.tasks.get(task_id)
    chain = state.last_chain.get(task_id)
    model = chain.attempts[-1].model if chain is not None and chain.attempts else (
        task.model if task is not None and task.model else "—")
    role = task.role if task is not None else (chain.role if chain is not None else "—")
    return f"{role}/{model}"


def quality_metrics(state: State, missions: Mapping[str, Iterable[str]] | None = None
                    ) -> dict[str, dict[str, dict[str, Any]]]:
    """{"tasks": {id: …}, "agents": {role/model: …}, "missions": {id: …}} for every task
    with something to say (an assessment, an attempt past the first, a deadline);
    `missions`: mission id → its task ids."""
    per_task: dict[str, Metrics] = {}
    ids = set(state.reviews) | set(state.last_chain) | set(state.sla_latest)
    for task_id in sorted(ids):
        if task_id in state.tasks or task_id in state.reviews or task_id in state.last_chain:
            per_task[task_id] = task_metrics(state, task_id)
    agents: dict[str, Metrics] = defaultdict(Metrics)
    for task_id, metrics in per_task.items():
        agents[agent_of(state, task_id)].add(metrics)
    per_mission: dict[str, Metrics] = {}
    for mission_id, task_ids in (missions or {}).items():
        total = Metrics()
        for task_id in task_ids:
            total.add(per_task.get(task_id) or task_metrics(state, task_id))
        per_mission[mission_id] = total
    return {"tasks": {k: v.as_dict() for k, v in per_task.items()},
            "agents": {k: v.as_dict() for k, v in sorted(agents.items())},
            "missions": {k: v.as_dict() for k, v in sorted(per_mission.items())}}
