"""The event history (#19.2, lazygit's command log, k9s's `:events`): everything that
happened to the project, newest first, as one list of `Entry`.

Two sources. What the files keep, read back on every start from the State: the
engine's events (runtime/engine_events.jsonl), SLA events, phase-gate events, gates
that blocked a task, and proposal decisions. What this console saw in its session:
each notification it showed and each operator action with its outcome (`Session`,
kept for the session, bounded). A pure function of those two: no I/O.
"""

from __future__ import annotations

import time
from collections import deque

import msgspec

from console.sdd.state import State

#: the pseudo-section a view names to be refreshed when the session adds an entry
HISTORY = "history"
#: a session keeps at most this many of its own entries (notifications, actions)
SESSION_LIMIT = 2000
#: the history shows at most this many entries, newest first
SHOWN_LIMIT = 5000


class Entry(msgspec.Struct, frozen=True):
    timestamp: float
    kind: str  # engine | action | notice | sla | gate | phase | proposal
    severity: str  # information | warning | error
    task_id: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.timestamp!r}:{self.task_id}:{hash(self.text)}"

    def matches(self, needle: str) -> bool:
        return not needle or needle in f"{self.kind} {self.task_id} {self.text}".lower()


class Session:
    """What the console itself said and did, in the order it happened."""

    def __init__(self) -> None:
        self.entries: deque[Entry] = deque(maxlen=SESSION_LIMIT)

    def note(self, text: str, severity: str) -> None:
        last = self.entries[-1] if self.entries else None
        if last is not None and last.kind == "action" and last.text.endswith(text):
            return  # the action's own outcome, already its entry
        self.entries.append(Entry(time.time(), "notice", severity, "", text))

    def action(self, name: str, ok: bool, message: str) -> None:
        self.entries.append(Entry(time.time(), "action", "information" if ok else "warning",
                                  "", f"{name}: {'done' if ok else 'refused'} — {message}"))


_LEVELS = {"info": "information", "warning": "warning", "error": "error"}


def entries(state: State, session: Session) -> list[Entry]:
    """Every entry, newest first (the caller holds the State's lock)."""
    found: list[Entry] = list(session.entries)
    for event in state.engine_events:
        found.append(Entry(event.timestamp or 0.0, "engine", _LEVELS.get(event.level, "warning"),
                           event.task_id or "", event.message))
    for sla in state.sla_latest.values():
        verdict = sla.event.removeprefix("sla:")
        found.append(Entry(sla.timestamp or 0.0, "sla",
                           {"violated": "error", "warning": "warning"}.get(verdict,
                                                                          "information"),
                           sla.entity_id, f"SLA {verdict} ({sla.entity_type})"))
    for phase in state.phase_events:
        failed = "failed" in phase.event
        found.append(Entry(phase.timestamp or 0.0, "phase",
                           "error" if failed else "information", phase.mission_id,
                           f"{phase.event} {phase.gate_name or ''} {phase.reason or ''}".strip()))
    for task_id in list(state.gate_latest):  # (as of the last read that ended)
        for line in state.latest_gates(task_id).values():
            if line.result == "blocked":
                found.append(Entry(line.timestamp or 0.0, "gate", "error", task_id,
                                   f"required gate {line.gate} blocked ({line.status})"))
    for pid, decisions in state.decisions.items():
        for decision in decisions:
            found.append(Entry(decision.decided_at or 0.0, "proposal",
                               "warning" if decision.awaits_human else "information", pid,
                               f"{decision.shown_outcome}: {decision.reason}"))
    found.sort(key=lambda e: e.timestamp, reverse=True)
    return found[:SHOWN_LIMIT]
