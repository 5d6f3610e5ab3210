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
