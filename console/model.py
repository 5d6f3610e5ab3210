"""Pure data: the task state machine, tasks, tickets and problems.

No I/O and no parsing here: `console.sdd` owns the on-disk formats and turns
lines into these types; the engine and the UI only ever see these types. The
metrics and evolution record types live in `console.records` and are re-exported
here, so `from console.model import GateResult` keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import msgspec

from console.records import NO_ITEMS


class TaskState(StrEnum):
    """Every status a Bernstein version writes to its task log."""

    # Bernstein 1.9.3 (reference/bernstein-formats.md §2.1)
    PLANNED = "planned"
    OPEN = "open"
    CLAIMED = "claimed"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    CLOSED = "closed"
    FAILED = "failed"
    BLOCKED = "blocked"
    WAITING_FOR_SUBTASKS = "waiting_for_subtasks"
    CANCELLED = "cancelled"
    ORPHANED = "orphaned"
    PENDING_APPROVAL = "pending_approval"
    # added by Bernstein 3.23.0 (reference/bernstein-observed.md, /tasks/counts)
    ABANDONED = "abandoned"
    BLOCKED_BY_ABANDON = "blocked_by_abandon"
    BLOCKED_BY_FAILED_DEP = "blocked_by_failed_dep"
    REFUSED = "refused"
    SUSPENDED = "suspended"

    @classmethod
    def parse(cls, value: str) -> TaskState | None:
        return _BY_VALUE.get(value)


S = TaskState
_BY_VALUE: dict[str, TaskState] = {state.value: state for state in TaskState}

#: Bernstein's TASK_TRANSITIONS (lifecycle.py, 1.9.3), plus edges for the five
#: 3.23.0 states: the blocked_* and suspended states behave like `blocked`;
#: abandoned and refused are terminal. The cascades' edges into blocked_by_*
#: (from open, claimed, in_progress, waiting_for_subtasks) are 3.23.0's own.
_STRANDING = (S.BLOCKED_BY_ABANDON, S.BLOCKED_BY_FAILED_DEP)
TRANSITIONS: MappingProxyType[TaskState, frozenset[TaskState]] = MappingProxyType(
    {
        S.PLANNED: frozenset({S.OPEN, S.CANCELLED, S.FAILED}),
        S.OPEN: frozenset({S.CLAIMED, S.WAITING_FOR_SUBTASKS, S.CANCELLED, S.FAILED,
                           *_STRANDING}),
        S.CLAIMED: frozenset(
            {S.IN_PROGRESS, S.OPEN, S.DONE, S.FAILED, S.CANCELLED, S.WAITING_FOR_SUBTASKS,
             S.BLOCKED, *_STRANDING}
        ),
        S.IN_PROGRESS: frozenset(
            {S.DONE, S.FAILED, S.BLOCKED, S.WAITING_FOR_SUBTASKS, S.OPEN, S.CANCELLED,
             S.ORPHANED, *_STRANDING}
        ),
        S.ORPHANED: frozenset({S.DONE, S.FAILED, S.OPEN}),
        S.BLOCKED: frozenset({S.OPEN, S.CANCELLED, S.FAILED}),
        S.WAITING_FOR_SUBTASKS: frozenset({S.DONE, S.BLOCKED, S.CANCELLED, S.FAILED,
                                           *_STRANDING}),
        S.FAILED: frozenset({S.OPEN}),
        S.DONE: frozenset({S.CLOSED, S.FAILED}),
        S.CLOSED: frozenset(),
        S.CANCELLED: frozenset(),
        S.PENDING_APPROVAL: frozenset(),
        S.ABANDONED: frozenset(),
        S.REFUSED: frozenset(),
        S.BLOCKED_BY_ABANDON: frozenset({S.OPEN, S.CANCELLED, S.FAILED}),
        S.BLOCKED_BY_FAILED_DEP: frozenset({S.OPEN, S.CANCELLED, S.FAILED}),
        S.SUSPENDED: frozenset({S.OPEN, S.CANCELLED, S.FAILED}),
    }
)

#: "No outbound edge" is terminal, as Bernstein computes TERMINAL_TASK_STATUSES.
TERMINAL_STATES = frozenset(s for s, targets in TRANSITIONS.items() if not targets)


def can_transition(src: TaskState, dst: TaskState) -> bool:
    return dst in TRANSITIONS[src]


#: Shown beside the state word, never instead of it (state is never colour alone).
STATE_GLYPHS: MappingProxyType[str, str] = MappingProxyType(
    {
        "planned": "◌", "open": "○", "claimed": "◔", "in_progress": "▶", "done": "✓",
        "closed": "✔", "failed": "✗", "blocked": "⊟", "waiting_for_subtasks": "⋯",
        "cancelled": "⊘", "orphaned": "⚠", "pending_approval": "?", "abandoned": "⊗",
        "blocked_by_abandon": "⊟", "blocked_by_failed_dep": "⊟", "refused": "⊖",
        "suspended": "‖",
    }
)
UNKNOWN_STATE_GLYPH = "¿"

#: A task whose work was delivered (Bernstein's SUCCESSFUL_TASK_STATUSES): the only
#: statuses that satisfy a dependant, pass a phase gate or count as a success.
SUCCEEDED = frozenset({"done", "closed"})
#: Ended without delivering (its UNSUCCESSFUL_TERMINAL_STATUSES): a dependant can never run.
DEAD_ENDS = frozenset({"failed", "cancelled", "abandoned", "refused"})


# -- the model ladder (seeds 001/002): cheapest first ---------------------------------

DEFAULT_LADDER: tuple[str, ...] = ("haiku", "sonnet", "opus")
#: each vendor CLI's own ladder, in its own model names (its aliases where it has them);
#: `cascade.ladders` overrides, `cascade.ladder` is for every other adapter (script…)
ADAPTER_LADDERS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "claude": DEFAULT_LADDER,
    "codex": ("gpt-6-luna", "gpt-6.1-sol", "gpt-6-astra"),
    "gemini": ("flash-lite", "flash", "pro"),
})
#: names that mark a model as one vendor's: a pin meant for another CLI is refused
MODEL_FAMILIES: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "claude": ("claude", "haiku", "sonnet", "opus"),
    "codex": ("gpt-", "codex", "o3", "o4-"),
    "gemini": ("gemini", "flash", "pro"),
})
#: a model's default reasoning effort, by the ladder name it contains; else "high"
EFFORT_BY_MODEL: MappingProxyType[str, str] = MappingProxyType({"opus": "max", "haiku": "low"})


def tier_of(model: str, ladder: tuple[str, ...] = DEFAULT_LADDER) -> int | None:
    """A model's rung: the first ladder name it contains, case-insensitively
    ("claude-sonnet-4" is on "sonnet"); None off the ladder."""
    name = model.lower()
    return next((i for i, tier in enumerate(ladder) if tier.lower() in name), None)


def next_model(current: str | None, ladder: tuple[str, ...] = DEFAULT_LADDER
               ) -> tuple[str, int] | None:
    """The next stronger model and its rung; None at the top. No model, or one off the
    ladder, goes to the second rung (the first is where every task starts)."""
    index = tier_of(current, ladder) if current else None
    if index is not None:
        return (ladder[index + 1], index + 1) if index + 1 < len(ladder) else None
    step = min(1, len(ladder) - 1)
    return ladder[step], step


def effort_of(model: str) -> str:
    name = model.lower()
    return next((e for key, e in EFFORT_BY_MODEL.items() if key in name), "high")


def family_of(model: str) -> str | None:
    """The vendor CLI a model name belongs to (None: not one we know)."""
    name = model.lower()
    return next((cli for cli, marks in MODEL_FAMILIES.items()
                 if any(mark in name for mark in marks)), None)


class Ladders(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The model ladder of each task: its adapter's (the task's `cli`, the adapter its
    last attempt ran, else the project's default), else the project's `cascade.ladder`."""

    default: tuple[str, ...] = DEFAULT_LADDER
    by_adapter: Mapping[str, tuple[str, ...]] = ADAPTER_LADDERS
    adapter: str = "auto"  # agents.default

    def adapter_of(self, task: Task | None) -> str:
        if task is None:
            return self.adapter
        return str(task.extra.get("cli") or task.metadata.get("adapter") or self.adapter)

    def of(self, task: Task | None = None, adapter: str | None = None) -> tuple[str, ...]:
        return self.by_adapter.get(adapter or self.adapter_of(task), self.default)


#: a gate result's status and its glyph (the word is always shown beside it)
GATE_GLYPHS: MappingProxyType[str, str] = MappingProxyType(
    {"pass": "✓", "fail": "✗", "warn": "!", "timeout": "◷", "skipped": "–", "bypassed": "↷"})


def gate_label(status: str) -> str:
    """Glyph and word, e.g. "✗ fail"; an unknown status gets "?"."""
    return f"{GATE_GLYPHS.get(status, '?')} {status}"


def state_label(status: str) -> str:
    """Glyph and word, e.g. "✗ failed"; an unknown state keeps the word as written."""
    return f"{STATE_GLYPHS.get(status, UNKNOWN_STATE_GLYPH)} {status}"


#: Bernstein 3.23.0's long state names, shortened for a table cell (each stays distinct;
#: the detail shows the full name). "‖" is the engine's pause only, never a task state.
SHORT_STATES: MappingProxyType[str, str] = MappingProxyType({
    "blocked_by_failed_dep": "dep failed", "blocked_by_abandon": "dep abandoned",
    "waiting_for_subtasks": "subtasks", "pending_approval": "approval"})


def short_state_label(status: str) -> str:
    return f"{STATE_GLYPHS.get(status, UNKNOWN_STATE_GLYPH)} {SHORT_STATES.get(status, status)}"


class Problem(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A record that could not be read: shown, counted, never fatal."""

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.reason}"


class CompletionSignal(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A janitor check. `value` is Bernstein's form; seed 001's keys map onto it."""

    type: str
    value: str
    expected_status: int | None = None  # api_responds only


class Task(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One task, as the last record for its id in runtime/tasks.jsonl says."""

    id: str
    title: str
    status: str  # as written; `state` is None when no Bernstein version knows it
    description: str = ""
    role: str = "backend"
    priority: int = 2
    scope: str = "medium"
    complexity: str = "medium"
    estimated_minutes: int | None = None
    task_type: str = "standard"
    depends_on: tuple[str, ...] = ()
    parent_task_id: str | None = None
    owned_files: tuple[str, ...] = ()
    assigned_agent: str | None = None
    result_summary: str | None = None
    tenant_id: str = "default"
    version: int = 1
    created_at: float | None = None
    claimed_at: float | None = None
    completed_at: float | None = None
    closed_at: float | None = None
    claimed_by_session: str | None = None
    retry_count: int = 0
    max_retries: int = 3
    terminal_reason: str | None = None
    # kept by us, dropped by Bernstein's writer
    deadline: float | None = None
    model: str | None = None
    effort: str | None = None
    completion_signals: tuple[CompletionSignal, ...] = ()
    metadata: MappingProxyType[str, Any] = NO_ITEMS
    #: every other key of the record, so a writer can emit the full record again
    extra: MappingProxyType[str, Any] = NO_ITEMS

    @property
    def state(self) -> TaskState | None:
        return TaskState.parse(self.status)

    @property
    def is_terminal(self) -> bool:
        state = self.state
        return state is not None and state in TERMINAL_STATES


class ArchiveRecord(msgspec.Struct, frozen=True, gc=False, array_like=True):
    task_id: str
    title: str
    role: str
    status: str
    created_at: float | None
    completed_at: float | None
    duration_seconds: float | None
    result_summary: str | None
    cost_usd: float | None


class Ticket(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A backlog ticket file, parsed; not yet a task."""

    source: str
    title: str
    description: str
    ticket_id: str = ""
    role: str = "backend"
    priority: int = 2
    scope: str = "medium"
    complexity: str = "medium"
    estimated_minutes: int = 45
    task_type: str = "feature"
    model: str | None = None
    effort: str | None = None
    depends_on: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    completion_signals: tuple[CompletionSignal, ...] = ()
    deadline: float | None = None
    sla_minutes: float | None = None
    require_review: bool = False
    require_human_approval: bool = False
    cli: str | None = None  # adapter override
    max_retries: int | None = None  # further attempts after the first (None: the ladder's)
    form: str = "yaml"  # yaml | front-matter | markdown


class Approval(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A human decision a Bernstein task server waits for (`GET /approvals`)."""

    task_id: str
    title: str = ""
    session_id: str = ""
    mechanism: str = "task_review"  # task_review | pre_spawn (3.23.0)
    diff: str = ""
    test_summary: str = ""
    prompt: str = ""
    unblocks: str = ""


from console.records import (  # noqa: E402 - re-exported: one import for every record type
    HUMAN_OUTCOMES,
    Attempt,
    Chain,
    Decision,
    EngineEvent,
    EngineStatus,
    Experiment,
    GateLine,
    GateReport,
    GateResult,
    JudgeScore,
    PhaseGateEvent,
    Proposal,
    Reflection,
    Review,
    ReviewFlag,
    SlaEvent,
    TaskMetric,
)

__all__ = [
    "HUMAN_OUTCOMES", "STATE_GLYPHS", "TERMINAL_STATES", "TRANSITIONS", "UNKNOWN_STATE_GLYPH",
    "Approval", "ArchiveRecord", "Attempt", "Chain", "CompletionSignal", "Decision",
    "EngineEvent", "EngineStatus", "Experiment", "GateLine", "GateReport", "GateResult",
    "JudgeScore", "PhaseGateEvent", "Problem", "Proposal", "Reflection", "Review", "ReviewFlag",
    "SlaEvent",
    "Task", "TaskMetric", "TaskState", "Ticket", "can_transition", "state_label",
]
