"""Pure data: the records the metrics and evolution files hold (gates, chains,
reflections, reviews, SLA and phase-gate events, proposals, decisions, engine events).

No I/O and no parsing: `console.sdd` owns the formats.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import msgspec

#: an empty mapping no one can change: the default of every mapping field
NO_ITEMS: MappingProxyType[str, Any] = MappingProxyType({})


class GateLine(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/quality_gates.jsonl."""

    task_id: str
    gate: str
    status: str  # pass | fail | warn | timeout | skipped | bypassed
    result: str  # pass | blocked | flagged
    timestamp: float | None
    duration_ms: int
    cached: bool
    required: bool


class GateResult(msgspec.Struct, frozen=True, gc=False, array_like=True):
    name: str
    status: str
    required: bool
    blocked: bool
    cached: bool
    duration_ms: int
    details: str
    digest: str = ""
    metadata: MappingProxyType[str, Any] = NO_ITEMS


class GateReport(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """runtime/gates/<task_id>.json."""

    task_id: str
    overall_pass: bool
    total_duration_ms: int
    results: tuple[GateResult, ...]
    changed_files: tuple[str, ...] = ()
    cache_hits: int = 0


class Attempt(msgspec.Struct, frozen=True, gc=False):
    model: str
    attempt_number: int
    success: bool
    effort: str | None = None
    started_at: float | None = None
    cost_usd: float = 0.0
    latency_s: float = 0.0
    tokens_used: int = 0
    escalated: bool = False
    escalation_reason: str | None = None


class Chain(msgspec.Struct, frozen=True, gc=False):
    """One line of metrics/cascade_chains.jsonl."""

    chain_id: str
    task_id: str
    role: str
    attempts: tuple[Attempt, ...]
    final_model: str | None
    succeeded: bool
    total_cost_usd: float = 0.0
    first_attempt_cost_usd: float = 0.0
    escalation_overhead_usd: float = 0.0
    saved_vs_direct_opus_usd: float = 0.0
    timestamp: float | None = None

    @property
    def escalated(self) -> bool:
        return any(a.escalated for a in self.attempts) or len(self.attempts) > 1


class TaskMetric(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/tasks.jsonl (Bernstein's evolution collector)."""

    task_id: str
    role: str
    model: str
    duration_seconds: float
    cost_usd: float
    janitor_passed: bool | None
    timestamp: float | None


class Reflection(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/reflections.jsonl: a diagnosis of one failed iteration."""

    task_id: str
    iteration: int
    gate: str
    error_pattern: str
    what_failed: str
    why: str
    try_next: str
    focus: str
    source: str  # llm | rules
    model: str | None = None
    digest: str = ""
    files_changed: tuple[str, ...] = ()
    reused: bool = False
    timestamp: float | None = None


class JudgeScore(msgspec.Struct, frozen=True, gc=False, array_like=True):
    judge: str
    dimension: str
    score: float
    reasoning: str = ""
    dropped: bool = False  # an outlier more than 1.5 from the median


class Review(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/reviews.jsonl: a multi-judge review of one task."""

    task_id: str
    scores: tuple[JudgeScore, ...]
    merged: MappingProxyType[str, float]
    global_score: float | None
    threshold: float
    passed: bool
    timestamp: float | None = None


class ReviewFlag(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/review_queue.jsonl: work that passed but that a check wants a
    human to look at (a judge accepting below 0.7 confidence, seed 000)."""

    task_id: str
    source: str  # the completion signal's type: llm_judge, llm_review, …
    detail: str
    timestamp: float | None = None
    attempt: int | None = None
    signal: str = ""


class SlaEvent(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/sla_events.jsonl."""

    event: str  # sla:warning | sla:violated | sla:met
    entity_id: str
    entity_type: str
    deadline: float | None
    timestamp: float | None = None
    elapsed: float | None = None
    remaining: float | None = None
    percent_used: float | None = None
    overdue_ms: float | None = None
    margin_ms: float | None = None


class PhaseGateEvent(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of metrics/phase_gates.jsonl."""

    event: str  # quality:gate:passed | :failed | :released | quality:threshold:failed
    mission_id: str
    gate_name: str | None = None
    reason: str | None = None
    avg_score: float | None = None
    threshold: float | None = None
    timestamp: float | None = None
    by: str | None = None  # who released a gate (the operator)


class Proposal(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of evolution/deferred.jsonl: a proposal routed to a human."""

    proposal_id: str
    title: str
    category: str
    description: str
    confidence: float
    reason: str
    deferred_at: float | None
    target_files: tuple[str, ...] = ()
    risk_level: str | None = None
    diff: str = ""


HUMAN_OUTCOMES = frozenset({"human_review_4h", "human_review_immediate", "blocked"})


class Decision(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of evolution/decisions.jsonl."""

    proposal_id: str
    outcome: str
    requires_human: bool
    risk_level: str
    confidence: float
    reason: str
    decided_at: float | None
    reviewer: str | None = None

    @property
    def awaits_human(self) -> bool:
        """Bernstein's get_pending_decisions rule for the latest decision."""
        return self.requires_human and self.outcome in HUMAN_OUTCOMES

    @property
    def shown_outcome(self) -> str:
        """The outcome as an operator reads it: Bernstein records a human's rejection
        with the outcome it rejected, and "Rejected by …" as the reason."""
        return "rejected" if self.reason.startswith("Rejected by") else self.outcome


class Experiment(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of evolution/experiments.jsonl."""

    proposal_id: str
    title: str
    risk_level: str
    accepted: bool
    reason: str
    delta: float | None = None
    timestamp: float | None = None


class EngineEvent(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One line of runtime/engine_events.jsonl: what the engine wants an operator to know."""

    level: str  # info | warning | error
    message: str
    timestamp: float | None = None
    task_id: str | None = None
    file: str | None = None


class EngineStatus(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """`.sdd/runtime/engine_status.json`: what the engine running the project is doing."""

    pid: int
    workers: int
    busy: int
    paused: bool
    running: bool  # False once the engine has stopped
    base: str = ""
    updated_at: float | None = None
