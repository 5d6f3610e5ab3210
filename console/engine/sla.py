"""The SLA monitor (seed 003, Polpo): deadlines that are watched.

A task's deadline comes from its `deadline` (ISO-8601 or epoch) or `sla_minutes`
(from creation), both kept in the task log. Every `check_interval` seconds:
`sla:warning` once when `warning_threshold` of the time is used, `sla:violated`
once past the deadline (and, with `violation_action: fail`, the task fails at
once, bypassing retries and escalation), `sla:met` when a task with a deadline
finishes in time. Events go to metrics/sla_events.jsonl with seed 003's payload, and a
warning to `warning_channels`, a violation to `violation_channels` (`console`, webhook
URLs: the phase gates' channels, engine/notify).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from console.engine.errors import IllegalTransition
from console.engine.events import EventLog
from console.engine.notify import Notifier, Post
from console.engine.store import TaskStore
from console.model import TERMINAL_STATES, Task, TaskState
from console.sdd.fileio import append_jsonl
from console.sdd.paths import Kind, SddPaths
from console.sdd.tail import JsonlTail

FINISHED = frozenset({TaskState.DONE, TaskState.CLOSED})


@dataclass(frozen=True, slots=True)
class SlaConfig:
    warning_threshold: float = 0.8
    check_interval: float = 30.0
    violation_action: str = "notify"  # notify | fail
    warning_channels: tuple[str, ...] = ()
    violation_channels: tuple[str, ...] = ()


def parse_sla(raw: object) -> SlaConfig:
    if raw is None:
        return SlaConfig()
    if not isinstance(raw, dict):
        raise ValueError("sla must be a map")
    unknown = set(raw) - {"warning_threshold", "warningThreshold", "check_interval",
                          "checkIntervalMs", "violation_action", "violationAction",
                          "warning_channels", "violation_channels", "warningChannels",
                          "violationChannels"}
    if unknown:
        raise ValueError(f"sla.{sorted(unknown)[0]} is not a known key")
    try:
        threshold = float(raw.get("warning_threshold", raw.get("warningThreshold", 0.8))
                          or 0.0)
    except (TypeError, ValueError):
        raise ValueError("sla.warning_threshold must be a number") from None
    interval = raw.get("check_interval")
    try:
        if interval is None and "checkIntervalMs" in raw:
            interval = float(raw["checkIntervalMs"]) / 1000
        interval = float(interval) if interval is not None else None
    except (TypeError, ValueError):
        raise ValueError("sla.check_interval must be a number of seconds") from None
    action = str(raw.get("violation_action", raw.get("violationAction", "notify")))
    if action not in ("notify", "fail"):
        raise ValueError(f"sla.violation_action '{action}' is not notify or fail")
    if not 0 < threshold < 1:
        raise ValueError("sla.warning_threshold must be between 0 and 1")
    return SlaConfig(threshold, max(1.0, float(interval if interval is not None else 30.0)),
                     action, _channels(raw, "warning_channels", "warningChannels"),
                     _channels(raw, "violation_channels", "violationChannels"))


def _channels(raw: dict[str, object], key: str, camel: str) -> tuple[str, ...]:
    value = raw.get(key, raw.get(camel))
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"sla.{key} must be a list of channel names or URLs")
    return tuple(value)


class SlaMonitor:
    def __init__(self, paths: SddPaths, store: TaskStore, events: EventLog, config: SlaConfig,
                 stop_agent: Callable[[str], None], clock: Callable[[], float] = time.time,
                 post: Post | None = None) -> None:
        self.paths = paths
        self.store = store
        self.events = events
        self.config = config
        self.stop_agent = stop_agent
        self.clock = clock
        self.notifier = Notifier(events, post)
        self._last = 0.0
        self._said: set[tuple[str, str]] = set()
        for _, record in JsonlTail(paths.of(Kind.SLA_EVENTS)).read().records:
            self._said.add((str(record.get("entity_id")), str(record.get("event"))))

    def due(self) -> bool:
        return self.clock() - self._last >= self.config.check_interval

    def _emit(self, event: str, task: Task, **payload: float | None) -> None:
        self._record(event, task.id, "task", task.deadline, payload)

    def _record(self, event: str, entity: str, kind: str, deadline: float | None,
                payload: dict[str, float | None]) -> None:
        self._said.add((entity, event))
        record = {"timestamp": self.clock(), "event": event, "entity_id": entity,
                  "entity_type": kind, "deadline": deadline, **payload}
        append_jsonl(self.paths.of(Kind.SLA_EVENTS), [record])
        channels = {"sla:warning": self.config.warning_channels,
                    "sla:violated": self.config.violation_channels}.get(event, ())
        self.notifier.notify(channels, record)

    def check_missions(self, missions: list[tuple[str, float, float, bool, float | None]]
                       ) -> None:
        """Missions with deadlines: the same three events, entity_type mission."""
        now = self.clock()
        for mission_id, deadline, started, finished, finished_at in missions:
            span = max(deadline - started, 1e-6)
            said = lambda e, m=mission_id: (m, e) in self._said  # noqa: E731
            if finished:
                if finished_at is not None and finished_at <= deadline and not said("sla:met") \
                        and not said("sla:violated"):
                    self._record("sla:met", mission_id, "mission", deadline,
                                 {"margin_ms": round((deadline - finished_at) * 1000)})
                continue
            if now > deadline and not said("sla:violated"):
                self._record("sla:violated", mission_id, "mission", deadline,
                             {"overdue_ms": round((now - deadline) * 1000)})
                # a warning in the event log: consoles announce the violation from sla_events
                self.events.warning(f"mission {mission_id}: SLA violated")
            elif (now - started) / span >= self.config.warning_threshold \
                    and not said("sla:warning") and now <= deadline:
                self._record("sla:warning", mission_id, "mission", deadline,
                             {"remaining": round(deadline - now, 3),
                              "percent_used": round((now - started) / span, 4)})

    def check(self) -> None:
        """One pass over every task with a deadline."""
        self._last = now = self.clock()
        for task in self.store.snapshot():
            if task.deadline is None or task.state is None:
                continue
            said = lambda event, task=task: (task.id, event) in self._said  # noqa: E731
            start = task.created_at or task.deadline
            span = max(task.deadline - start, 1e-6)
            if task.state in FINISHED:
                finished = task.completed_at or now
                if said("sla:met") or said("sla:violated"):
                    continue
                if finished <= task.deadline:
                    self._emit("sla:met", task, margin_ms=round((task.deadline - finished) * 1000))
                else:  # it finished late between two checks: still a violation
                    self._emit("sla:violated", task,
                               overdue_ms=round((finished - task.deadline) * 1000),
                               elapsed=round(finished - start, 3))
                continue
            if task.state in TERMINAL_STATES or task.state is TaskState.FAILED:
                continue
            elapsed = now - start
            if now > task.deadline:
                if not said("sla:warning"):  # a coarse interval skipped past the threshold
                    self._emit("sla:warning", task, elapsed=round(elapsed, 3), remaining=0.0,
                               percent_used=round(elapsed / span, 4))
                if not said("sla:violated"):
                    overdue = round((now - task.deadline) * 1000)
                    self._emit("sla:violated", task, overdue_ms=overdue,
                               elapsed=round(elapsed, 3), percent_used=round(elapsed / span, 4))
                    self._violated(task, overdue)
            elif elapsed / span >= self.config.warning_threshold and not said("sla:warning"):
                self._emit("sla:warning", task, elapsed=round(elapsed, 3),
                           remaining=round(task.deadline - now, 3),
                           percent_used=round(elapsed / span, 4))
                self.events.warning(f"{task.id}: SLA warning — {elapsed / span:.0%} of its time "
                                    f"used, {task.deadline - now:.0f} s left", task_id=task.id)

    def _violated(self, task: Task, overdue_ms: int) -> None:
        message = f"SLA violated: deadline passed {overdue_ms / 1000:.1f} s ago"
        if self.config.violation_action != "fail":
            # a warning in the event log: consoles announce the violation from sla_events
            self.events.warning(f"{task.id}: {message}", task_id=task.id)
            return
        try:  # fail at once: no retry, no escalation
            self.store.transition(task.id, TaskState.FAILED, reason=f"{message} "
                                  "(violation_action: fail)", metadata={"next_model": None})
        except IllegalTransition as exc:
            self.events.error(f"{task.id}: {message}; could not fail it: {exc}", task_id=task.id)
            return
        self.stop_agent(task.id)
        self.events.error(f"{task.id}: {message}; failed (violation_action: fail)",
                          task_id=task.id)
