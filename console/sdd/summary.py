"""The one-shot summary behind `bernstein-tui status` (DESIGN §2)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from console.model import TaskState
from console.sdd.state import State


def summarise(state: State) -> dict[str, Any]:
    by_state = state.state_counts()
    ordered = {s.value: by_state[s.value] for s in TaskState if by_state[s.value]}
    ordered.update({k: v for k, v in sorted(by_state.items()) if k not in ordered})
    sla = Counter(event.event for event in state.sla_latest.values())
    chains, escalated = state.chain_stats()  # (a checkpoint's chains stay undecoded)
    pending = state.pending_proposals()
    return {
        "tasks": {"total": len(state.tasks), "by_state": ordered},
        "archive": {
            "total": state.archive_records,
            "by_status": dict(sorted(Counter(r.status for r in state.archive.values()).items())),
        },
        "backlog": {"open": len(state.tickets)},
        "gates": {
            "by_gate": {gate: dict(sorted(counts.items()))
                        for gate, counts in sorted(state.gate_counts.items())},
            "reports": len(state.gate_reports),
        },
        "chains": {"total": chains, "escalated": escalated},
        "reflections": {"total": state.reflection_count},
        "reviews": {"total": state.review_count},
        "review_queue": [
            {"task_id": f.task_id, "attempt": f.attempt, "source": f.source,
             "signal": f.signal, "detail": f.detail, "timestamp": f.timestamp}
            for f in state.review_queue
        ],
        "proposals": {
            "deferred": len(state.proposals),
            "pending": len(pending),
            "pending_ids": pending,
        },
        "sla": {
            "warning": sla["sla:warning"],
            "violated": sla["sla:violated"],
            "met": sla["sla:met"],
        },
        "engine": {
            "warnings": state.engine_event_levels["warning"],
            "errors": state.engine_event_levels["error"],
            "last": state.engine_events[-1].message if state.engine_events else None,
        },
        "agents": [agent.as_json() for agent in state.agents],
        "problems": [
            {"file": p.file, "line": p.line, "reason": p.reason} for p in state.problems
        ],
    }
