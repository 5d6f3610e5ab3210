"""The evolution formats: deferred.jsonl, decisions.jsonl, experiments.jsonl (reference §4.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.model import Decision, Experiment, Proposal
from console.sdd.fields import (
    RecordError,
    bool_or,
    choice,
    float_or,
    opt_epoch,
    opt_float,
    opt_str,
    req_str,
    str_or,
    str_tuple,
)

RISK_LEVELS = ("config", "template", "logic", "structural")  # L0..L3
OUTCOMES = frozenset(
    {"auto_approved", "auto_approved_audit", "human_review_4h", "human_review_immediate",
     "blocked", "rejected"}
)


def _confidence(d: Mapping[str, Any]) -> float:
    value = float_or(d, "confidence", 0.0)
    if not 0.0 <= value <= 1.0:
        raise RecordError(f"field 'confidence': {value} is outside 0..1")
    return value


def decode_proposal(d: Mapping[str, Any]) -> Proposal:
    return Proposal(
        proposal_id=req_str(d, "proposal_id"),
        title=str_or(d, "title", ""),
        category=str_or(d, "category", ""),
        description=str_or(d, "description", ""),
        confidence=_confidence(d),
        reason=str_or(d, "reason", ""),
        deferred_at=opt_epoch(d, "deferred_at"),
        target_files=str_tuple(d, "target_files"),
        risk_level=opt_str(d, "risk_level"),
        diff=str_or(d, "diff", ""),
    )


def decode_decision(d: Mapping[str, Any]) -> Decision:
    return Decision(
        proposal_id=req_str(d, "proposal_id"),
        outcome=choice(d, "outcome", OUTCOMES),
        requires_human=bool_or(d, "requires_human", False),
        risk_level=str_or(d, "risk_level", "logic"),
        confidence=_confidence(d),
        reason=str_or(d, "reason", ""),
        decided_at=opt_epoch(d, "decided_at"),
        reviewer=opt_str(d, "reviewer"),
    )


def decode_experiment(d: Mapping[str, Any]) -> Experiment:
    return Experiment(
        proposal_id=req_str(d, "proposal_id"),
        title=str_or(d, "title", ""),
        risk_level=str_or(d, "risk_level", ""),
        accepted=bool_or(d, "accepted", False),
        reason=str_or(d, "reason", ""),
        delta=opt_float(d, "delta"),
        timestamp=opt_epoch(d, "timestamp"),
    )


def encode_experiment(*, proposal_id: str, title: str, risk_level: str, accepted: bool,
                      reason: str, timestamp: float, duration_seconds: float = 0.0,
                      baseline_score: float | None = None, candidate_score: float | None = None,
                      **extra: Any) -> dict[str, Any]:
    """One experiments.jsonl line, as Bernstein's ExperimentResult.to_dict writes it.

    Bernstein reads every line with `float(d.get("delta", 0.0))` (`evolve status`,
    `evolve export`): a null there raises, so a score that is not known is left out
    (and `delta` with it) rather than written as null. `extra` keys (our own: steps,
    diff_sha) follow Bernstein's.
    """
    line: dict[str, Any] = {"proposal_id": proposal_id, "title": title, "risk_level": risk_level}
    if baseline_score is not None:
        line["baseline_score"] = baseline_score
    if candidate_score is not None:
        line["candidate_score"] = candidate_score
    if baseline_score is not None and candidate_score is not None:
        line["delta"] = round(candidate_score - baseline_score, 6)
    line.update(accepted=accepted, reason=reason[:2000], cost_usd=0.0,
                duration_seconds=round(duration_seconds, 3), timestamp=timestamp)
    line.update(extra)
    return line
