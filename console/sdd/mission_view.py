"""Missions as the operator sees them (issue #20.5): each mission's tasks and their
states, its phase gates with their last decision (waiting, passed, failed, released:
why, the average score, when, by whom), whether it is halted and by which gate, and its
quality threshold. Shared by the Missions screen and `status --json` `missions`.

The definitions come from bernstein.yaml / .sdd/missions (sdd/missions.py); decisions
from metrics/phase_gates.jsonl. A mission that only the decisions name (its definition
gone or unreadable) is still listed, from what was decided.
"""

from __future__ import annotations

from typing import Any

from console.records import PhaseGateEvent
from console.sdd.missions import Mission
from console.sdd.state import State

ENDED = frozenset({"done", "closed", "failed", "cancelled", "abandoned", "refused"})
GATE_STATUS = {"quality:gate:passed": "passed", "quality:gate:failed": "failed",
               "quality:gate:released": "released"}


def _resolver(state: State) -> dict[str, str]:
    """Task id or title → task id (an id wins over another task's title)."""
    by: dict[str, str] = {}
    for task in state.tasks.values():
        by.setdefault(task.title, task.id)
    for task_id in state.tasks:
        by[task_id] = task_id
    return by


def _gate_entry(name: str, decision: PhaseGateEvent | None, after: list[str],
                blocks: list[str], min_score: float | None, require_all: bool
                ) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "after": after, "blocks": blocks,
                             "min_score": min_score, "require_all_passed": require_all,
                             "status": "waiting", "reason": None, "avg_score": None,
                             "at": None, "by": None}
    if decision is not None:
        entry.update(status=GATE_STATUS.get(decision.event, "waiting"),
                     reason=decision.reason, avg_score=decision.avg_score,
                     at=decision.timestamp, by=decision.by)
    return entry


def mission_task_ids(missions: list[Mission], state: State) -> dict[str, list[str]]:
    """Mission id → the ids of its tasks that exist."""
    ids = _resolver(state)
    return {m.id: [ids[ref] for ref in m.tasks if ref in ids] for m in missions}


def missions_view(missions: list[Mission], state: State) -> list[dict[str, Any]]:
    ids = _resolver(state)
    last: dict[tuple[str, str], PhaseGateEvent] = {}
    threshold_failed: dict[str, PhaseGateEvent] = {}
    for event in state.phase_events:
        if event.event == "quality:threshold:failed":
            threshold_failed[event.mission_id] = event
        elif event.gate_name:
            last[(event.mission_id, event.gate_name)] = event
    out: list[dict[str, Any]] = []
    defined = {m.id for m in missions}
    for mission in missions:
        tasks: list[dict[str, Any]] = [{"ref": ref, "id": ids.get(ref),
                  "status": state.tasks[ids[ref]].status if ref in ids else "not created"}
                 for ref in mission.tasks]
        gates: list[dict[str, Any]] = []
        halted_by = None
        for gate in mission.gates:
            decision = last.get((mission.id, gate.name))
            gates.append(_gate_entry(gate.name, decision, list(gate.after), list(gate.blocks),
                                     gate.min_score, gate.require_all_passed))
            if gates[-1]["status"] == "failed" and halted_by is None:
                halted_by = gate.name
        done = sum(1 for t in tasks if t["status"] in ("done", "closed"))
        ended = all(t["status"] in ENDED for t in tasks) and bool(tasks)
        failed = threshold_failed.get(mission.id)
        out.append({
            "id": mission.id,
            "state": "halted" if halted_by else "finished" if ended else "running",
            "halted_by": halted_by, "done": done, "total": len(tasks), "tasks": tasks,
            "gates": gates, "threshold": mission.threshold, "deadline": mission.deadline,
            "threshold_failed": failed is not None,
            "avg_score": failed.avg_score if failed is not None else None,
        })
    for (mission_id, gate_name), event in sorted(last.items()):  # decisions, no definition
        if mission_id in defined:
            continue
        entry = next((m for m in out if m["id"] == mission_id), None)
        if entry is None:
            entry = {"id": mission_id, "state": "unknown (not defined now)", "halted_by": None,
                     "done": 0, "total": 0, "tasks": [], "gates": [], "threshold": None,
                     "deadline": None, "threshold_failed": mission_id in threshold_failed,
                     "avg_score": None}
            out.append(entry)
        entry["gates"].append(_gate_entry(gate_name, event, [], [], None, False))
    return out
