"""Keeping missions' phase quality gates (seed 003, Polpo); the format is read by
console/sdd/missions.py.

A gate's blocksTasks stay blocked until it passes; it is evaluated once all its
afterTasks are terminal, at most once; minScore uses the review scores. A failed gate
halts its mission, as the seed says: its blocksTasks and every task of the mission not
yet started are held, saying why, until the operator releases the gate (recorded as
quality:gate:released, with the reason and who). A mission under its threshold emits
quality:threshold:failed. Events go to metrics/phase_gates.jsonl; channels: `console`
(an engine notice) and webhook URLs (an httpx POST, best effort).
"""

from __future__ import annotations

import statistics
import time

from console.control import Outcome
from console.engine.errors import IllegalTransition
from console.engine.events import EventLog
from console.engine.notify import Notifier, Post
from console.engine.store import TaskStore
from console.model import SUCCEEDED, Task, TaskState
from console.sdd.fileio import append_jsonl
from console.sdd.missions import Mission, PhaseGate
from console.sdd.paths import Kind, SddPaths
from console.sdd.tail import JsonlTail

ENDED = frozenset({"done", "closed", "failed", "cancelled", "abandoned", "refused"})
PASSED, FAILED, RELEASED = "quality:gate:passed", "quality:gate:failed", "quality:gate:released"
#: a gate decided so: its tasks run
OPENED = frozenset({PASSED, RELEASED})
#: a mission's tasks that a halt holds (running ones finish)
HALTABLE = frozenset({TaskState.OPEN, TaskState.BLOCKED})


Decisions = dict[tuple[str, str], str]


def read_decisions(paths: SddPaths) -> tuple[Decisions, Decisions, set[str]]:
    """From metrics/phase_gates.jsonl: each gate's last decision and its reason by
    (mission, gate), and the missions whose threshold failure was already said."""
    decided: Decisions = {}
    reasons: Decisions = {}
    threshold_said: set[str] = set()
    for _, r in JsonlTail(paths.of(Kind.PHASE_GATES)).read().records:
        if r.get("event") == "quality:threshold:failed":
            threshold_said.add(str(r.get("mission_id")))
        elif r.get("gate_name"):
            key = (str(r.get("mission_id")), str(r["gate_name"]))
            decided[key] = str(r.get("event"))
            reasons[key] = str(r.get("reason") or "")
    return decided, reasons, threshold_said


def release_gate(paths: SddPaths, missions: list[Mission],
                 decided: Decisions, mission_id: str, gate_name: str,
                 reason: str, by: str = "operator") -> Outcome:
    """The operator's explicit release of a held or failed gate: recorded (who, why),
    after which its tasks run as if it had passed."""
    mission = next((m for m in missions if m.id == mission_id), None)
    if mission is None:
        known = ", ".join(m.id for m in missions) or "none configured"
        return Outcome.refused(f"no mission '{mission_id}' (missions: {known})")
    gate = next((g for g in mission.gates if g.name == gate_name), None)
    if gate is None:
        known = ", ".join(g.name for g in mission.gates) or "none"
        return Outcome.refused(f"mission {mission_id} has no phase gate '{gate_name}' "
                               f"(gates: {known})")
    was = decided.get((mission_id, gate_name))
    if was in OPENED:
        return Outcome.refused(f"phase gate '{gate_name}' of mission {mission_id} is already "
                               f"{'passed' if was == PASSED else 'released'}; nothing is held")
    if not reason.strip():
        return Outcome.refused("release refused: give a reason (it is recorded)")
    append_jsonl(paths.of(Kind.PHASE_GATES), [{
        "timestamp": time.time(), "event": RELEASED, "mission_id": mission_id,
        "gate_name": gate_name, "reason": reason.strip(), "by": by}])
    decided[(mission_id, gate_name)] = RELEASED
    state = "failed" if was == FAILED else "not yet evaluated"
    return Outcome.done(f"mission {mission_id}: phase gate '{gate_name}' ({state}) released "
                        f"by {by}: {reason.strip()}; its tasks run")


class MissionKeeper:
    def __init__(self, paths: SddPaths, store: TaskStore, events: EventLog,
                 missions: list[Mission], post: Post | None = None
                 ) -> None:
        self.paths = paths
        self.store = store
        self.events = events
        self.missions = missions
        self.notifier = Notifier(events, post)
        self._decided, self._reasons, self._threshold_said = read_decisions(paths)
        self._reviews = JsonlTail(paths.of(Kind.REVIEWS))
        self._scores: dict[str, float] = {}

    def _resolve(self, ref: str) -> Task | None:
        task = self.store.tasks.get(ref)
        if task is not None:
            return task
        return next((t for t in self.store.tasks.values() if t.title == ref), None)

    def _score(self, task_id: str) -> float | None:
        for _, record in self._reviews.read().records:
            if record.get("global_score") is not None:
                self._scores[str(record.get("task_id"))] = float(record["global_score"])
        return self._scores.get(task_id)

    def held(self, task: Task) -> bool:
        return bool(task.metadata.get("held_by"))

    def tick(self) -> None:
        with self.store.lock:
            for mission in self.missions:
                for gate in mission.gates:
                    self._gate(mission, gate)
                self._threshold(mission)
        self.notifier.flush()  # never while holding the task store's lock

    def release(self, mission_id: str, gate_name: str, reason: str,
                by: str = "operator") -> Outcome:
        """The operator releases a gate: recorded, and its tasks run from the next tick."""
        with self.store.lock:
            outcome = release_gate(self.paths, self.missions, self._decided, mission_id,
                                   gate_name, reason, by)
        if outcome.ok:
            self.tick()
        return outcome

    def _halt(self, mission: Mission, gate: PhaseGate, reason: str) -> None:
        """A failed gate halts its mission: every task of it not started is held."""
        why = (f"blocked: mission {mission.id} halted: phase gate '{gate.name}' failed: "
               f"{reason} (release the gate to go on)")
        for ref in (*gate.blocks, *mission.tasks):
            task = self._resolve(ref)
            if task is None or task.state not in HALTABLE:
                continue
            holder = task.metadata.get("held_by")
            if holder in (None, gate.name) and task.result_summary != why:
                self.store.update(task.id, result_summary=why, metadata={"held_by": gate.name})

    def _gate(self, mission: Mission, gate: PhaseGate) -> None:
        decided = self._decided.get((mission.id, gate.name))
        if decided in OPENED:
            for ref in (*gate.blocks, *mission.tasks):
                task = self._resolve(ref)
                if task is not None and task.metadata.get("held_by") == gate.name:
                    self._release(task)
            return
        if decided == FAILED:  # halted until released; tasks ingested since are held too
            self._halt(mission, gate, self._reasons.get((mission.id, gate.name))
                       or "see metrics/phase_gates.jsonl")
            return
        blocks = [t for ref in gate.blocks if (t := self._resolve(ref)) is not None]
        for task in blocks:
            holder = task.metadata.get("held_by")
            if holder and holder != gate.name:
                continue  # already held by another gate: one hold at a time, no churn
            if holder != gate.name and task.state in (TaskState.OPEN, TaskState.BLOCKED):
                self._hold(task, gate, f"held by phase gate '{gate.name}' until "
                                       f"{', '.join(gate.after)} finish")
        if decided is not None:
            return
        after = [self._resolve(ref) for ref in gate.after]
        if not after or any(t is None or t.status not in ENDED for t in after):
            return
        reason, avg = self._verdict(gate, [t for t in after if t is not None])
        event = FAILED if reason else PASSED
        record = {"timestamp": time.time(), "event": event, "mission_id": mission.id,
                  "gate_name": gate.name, "reason": reason, "avg_score": avg}
        append_jsonl(self.paths.of(Kind.PHASE_GATES), [record])
        self._decided[(mission.id, gate.name)] = event
        if reason:
            self._reasons[(mission.id, gate.name)] = reason
            self._halt(mission, gate, reason)
            self.events.warning(f"mission {mission.id} halted: phase gate '{gate.name}' "
                                f"failed — {reason} (release it from the Missions screen or "
                                f"`release-gate {mission.id} {gate.name} --reason …`)")
        else:
            for task in blocks:
                self._release(task)
            self.events.info(f"mission {mission.id}: phase gate '{gate.name}' passed"
                             + (f" (average score {avg})" if avg is not None else ""))
        self.notifier.notify(gate.channels, record)

    def _verdict(self, gate: PhaseGate, after: list[Task]) -> tuple[str | None, float | None]:
        if gate.require_all_passed:
            bad = [f"{t.id} {t.status}" for t in after if t.status not in SUCCEEDED]
            if bad:
                return "after-task(s) did not pass: " + ", ".join(bad), None
        if gate.min_score is None:
            return None, None
        scores = {t.id: self._score(t.id) for t in after}
        missing = [tid for tid, score in scores.items() if score is None]
        if missing:
            return "no review score for " + ", ".join(missing), None
        avg = round(statistics.mean(s for s in scores.values() if s is not None), 3)
        if avg < gate.min_score:
            return f"average review score {avg} is below minScore {gate.min_score}", avg
        return None, avg

    def holder(self, task_id: str, title: str) -> str | None:
        """The gate that must hold a task being created (ingestion creates it blocked:
        Bernstein's table has no open → blocked edge): one it waits behind, or a failed
        one that halted its mission."""
        for mission in self.missions:
            for gate in mission.gates:
                decided = self._decided.get((mission.id, gate.name))
                if decided in OPENED:
                    continue
                if task_id in gate.blocks or title in gate.blocks:
                    return gate.name
                if decided == FAILED and (task_id in mission.tasks or title in mission.tasks):
                    return gate.name
        return None

    def _hold(self, task: Task, gate: PhaseGate, reason: str) -> None:
        """Blocked tasks carry the hold; an already open one stays open but is not claimed
        (the engine's dispatch skips held tasks) — there is no open → blocked edge."""
        if task.result_summary != reason or task.metadata.get("held_by") != gate.name:
            self.store.update(task.id, result_summary=reason, metadata={"held_by": gate.name})

    def _release(self, task: Task) -> None:
        self.store.update(task.id, metadata={"held_by": None},
                          result_summary="released by its phase gate")
        deps = [self.store.tasks.get(d) for d in task.depends_on]
        if task.state is TaskState.BLOCKED and all(d is not None and d.status in SUCCEEDED
                                                   for d in deps):
            try:
                self.store.transition(task.id, TaskState.OPEN, result_summary=None)
            except IllegalTransition as exc:
                self.events.error(str(exc), task_id=task.id)

    def _threshold(self, mission: Mission) -> None:
        if mission.threshold is None or mission.id in self._threshold_said:
            return
        tasks = [self._resolve(ref) for ref in mission.tasks]
        if not tasks or any(t is None or t.status not in ENDED for t in tasks):
            return
        weighted = [(self._score(t.id), mission.weights.get(t.id, mission.weights.get(
            t.title, 1.0))) for t in tasks if t is not None and t.status in SUCCEEDED]
        scored = [(s, w) for s, w in weighted if s is not None]
        if not scored:
            return
        avg = round(sum(s * w for s, w in scored) / sum(w for _, w in scored), 3)
        self._threshold_said.add(mission.id)
        if avg < mission.threshold:
            record = {"timestamp": time.time(), "event": "quality:threshold:failed",
                      "mission_id": mission.id, "avg_score": avg,
                      "threshold": mission.threshold}
            append_jsonl(self.paths.of(Kind.PHASE_GATES), [record])
            self.events.warning(f"mission {mission.id}: average score {avg} is below its "
                                f"quality threshold {mission.threshold}")


def mission_deadlines(keeper: MissionKeeper) -> list[tuple[str, float, float, bool, float | None]]:
    """(mission id, deadline, started, finished, finished_at) for missions with a deadline."""
    out = []
    for mission in keeper.missions:
        if mission.deadline is None:
            continue
        tasks = [t for ref in mission.tasks if (t := keeper._resolve(ref)) is not None]
        if not tasks:
            continue
        started = min((t.created_at or mission.deadline) for t in tasks)
        finished = all(t.status in ENDED for t in tasks)
        finished_at = max((t.completed_at or 0.0) for t in tasks) if finished else None
        out.append((mission.id, mission.deadline, started, finished, finished_at))
    return out
