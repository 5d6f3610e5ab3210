"""Missions and their phase quality gates (seed 003, Polpo).

A mission (in bernstein.yaml `missions:` or .sdd/missions/*.yaml) lists tasks by
ticket id or title, `qualityGates` (name, afterTasks, blocksTasks, minScore,
requireAllPassed, notifyChannels) and a `qualityThreshold`. A gate's blocksTasks
stay blocked until it passes; it is evaluated once all its afterTasks are
terminal, at most once; minScore uses the review scores; a failed gate keeps
them blocked and says why; a mission under its threshold emits
quality:threshold:failed. Events go to metrics/phase_gates.jsonl; channels:
`console` (an engine notice) and webhook URLs (an httpx POST, best effort).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import yaml

from console.engine.errors import IllegalTransition
from console.engine.events import EventLog
from console.engine.store import TaskStore
from console.model import SUCCEEDED, Task, TaskState
from console.sdd.fields import RecordError, brief, to_epoch
from console.sdd.fileio import append_jsonl, read_regular_file
from console.sdd.paths import Kind, SddPaths
from console.sdd.safe_yaml import load_yaml
from console.sdd.tail import JsonlTail

ENDED = frozenset({"done", "closed", "failed", "cancelled", "abandoned", "refused"})
WEBHOOK_DEADLINE_S = 5.0


@dataclass(frozen=True, slots=True)
class PhaseGate:
    name: str
    after: tuple[str, ...]
    blocks: tuple[str, ...]
    min_score: float | None = None
    require_all_passed: bool = False
    channels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Mission:
    id: str
    tasks: tuple[str, ...]
    gates: tuple[PhaseGate, ...]
    threshold: float | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    deadline: float | None = None


def _names(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    out = []
    for item in value:
        if isinstance(item, dict):
            item = item.get("id") or item.get("title")
        if not isinstance(item, str | int) or isinstance(item, bool):
            raise ValueError(f"{where} lists {brief(item)}, not a task id or title")
        out.append(str(item))
    return tuple(out)


def parse_mission(raw: object, where: str) -> Mission:
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a map")
    name = str(raw.get("id") or raw.get("name") or "").strip()
    if not name:
        raise ValueError(f"{where} needs a name")
    gates = []
    for index, gate in enumerate(raw.get("qualityGates") or raw.get("quality_gates") or []):
        at = f"{where}.qualityGates[{index}]"
        if not isinstance(gate, dict) or not gate.get("name"):
            raise ValueError(f"{at} needs a name")
        score = gate.get("minScore", gate.get("min_score"))
        gates.append(PhaseGate(
            str(gate["name"]), _names(gate.get("afterTasks"), f"{at}.afterTasks"),
            _names(gate.get("blocksTasks"), f"{at}.blocksTasks"),
            None if score is None else float(score),
            bool(gate.get("requireAllPassed", gate.get("require_all_passed", False))),
            _names(gate.get("notifyChannels"), f"{at}.notifyChannels")))
    weights = {}
    for item in raw.get("tasks") or []:
        if isinstance(item, dict) and "priority" in item:
            weights[str(item.get("id") or item.get("title"))] = float(item["priority"])
    threshold = raw.get("qualityThreshold", raw.get("quality_threshold"))
    deadline = raw.get("deadline")
    return Mission(name, _names(raw.get("tasks"), f"{where}.tasks"), tuple(gates),
                   None if threshold is None else float(threshold), weights,
                   None if deadline is None else to_epoch(f"{where}.deadline", deadline))


def load_missions(paths: SddPaths, raw: object) -> tuple[list[Mission], list[str]]:
    """Missions from bernstein.yaml and .sdd/missions/; (missions, problems)."""
    missions, problems = [], []
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            missions.append(parse_mission(item, f"missions[{index}]"))
        except (ValueError, TypeError) as exc:
            problems.append(f"bernstein.yaml: {exc}")
    directory = paths.sdd / "missions"
    for path in sorted(directory.glob("*.y*ml")) if directory.is_dir() else []:
        data, problem = read_regular_file(path, paths.display(path), 1024 * 1024)
        if data is None:
            problems.append(str(problem))
            continue
        try:
            missions.append(parse_mission(load_yaml(data.decode("utf-8")), paths.display(path)))
        except (ValueError, TypeError, RecordError, yaml.YAMLError) as exc:
            problems.append(f"{paths.display(path)}: {exc}")
    return missions, problems


class MissionKeeper:
    def __init__(self, paths: SddPaths, store: TaskStore, events: EventLog,
                 missions: list[Mission], post: Callable[[str, dict], None] | None = None
                 ) -> None:
        self.paths = paths
        self.store = store
        self.events = events
        self.missions = missions
        self.post = post or _webhook
        self._decided: dict[tuple[str, str], str] = {}
        self._threshold_said: set[str] = set()
        for _, r in JsonlTail(paths.of(Kind.PHASE_GATES)).read().records:
            if r.get("event") == "quality:threshold:failed":
                self._threshold_said.add(str(r.get("mission_id")))
            elif r.get("gate_name"):
                self._decided[(str(r.get("mission_id")), str(r["gate_name"]))] = str(r["event"])
        self._reviews = JsonlTail(paths.of(Kind.REVIEWS))
        self._scores: dict[str, float] = {}
        self._outbox: list[tuple[str, dict[str, Any]]] = []  # webhooks, sent after the lock

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
        outbox, self._outbox = self._outbox, []
        for url, record in outbox:  # never while holding the task store's lock
            self._deliver(url, record)

    def _gate(self, mission: Mission, gate: PhaseGate) -> None:
        decided = self._decided.get((mission.id, gate.name))
        blocks = [t for ref in gate.blocks if (t := self._resolve(ref)) is not None]
        if decided == "quality:gate:passed":
            for task in blocks:
                if task.metadata.get("held_by") == gate.name:
                    self._release(task)
            return
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
        event = "quality:gate:failed" if reason else "quality:gate:passed"
        record = {"timestamp": time.time(), "event": event, "mission_id": mission.id,
                  "gate_name": gate.name, "reason": reason, "avg_score": avg}
        append_jsonl(self.paths.of(Kind.PHASE_GATES), [record])
        self._decided[(mission.id, gate.name)] = event
        if reason:
            for task in blocks:
                self._hold(task, gate, f"blocked: phase gate '{gate.name}' failed: {reason}")
            self.events.warning(f"mission {mission.id}: phase gate '{gate.name}' failed — "
                                f"{reason}")
        else:
            for task in blocks:
                self._release(task)
            self.events.info(f"mission {mission.id}: phase gate '{gate.name}' passed"
                             + (f" (average score {avg})" if avg is not None else ""))
        self._notify(gate.channels, record)

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
        Bernstein's table has no open → blocked edge)."""
        for mission in self.missions:
            for gate in mission.gates:
                if (task_id in gate.blocks or title in gate.blocks) and self._decided.get(
                        (mission.id, gate.name)) != "quality:gate:passed":
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

    def _notify(self, channels: tuple[str, ...], record: dict[str, Any]) -> None:
        for channel in channels:
            if channel.startswith(("http://", "https://")):
                self._outbox.append((channel, record))
            elif channel != "console":  # console: the engine notice above already went out
                self.events.warning(f"notify channel '{channel}' is not console or a URL")

    def _deliver(self, url: str, record: dict[str, Any]) -> None:
        """Best effort, bounded in total (a slow server cannot hold the engine)."""
        import threading

        errors: list[str] = []

        def send() -> None:
            try:
                self.post(url, record)
            except Exception as exc:  # logged, never fatal
                errors.append(f"{type(exc).__name__}: {exc}")

        sender = threading.Thread(target=send, daemon=True, name="webhook")
        sender.start()
        sender.join(WEBHOOK_DEADLINE_S)
        if sender.is_alive():
            errors.append(f"no answer within {WEBHOOK_DEADLINE_S:.0f} s")
        if errors:
            self.events.warning(f"webhook {url} failed: {errors[0]}")


def _webhook(url: str, record: dict[str, Any]) -> None:
    response = httpx.post(url, json=record, timeout=5.0)
    response.raise_for_status()



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
