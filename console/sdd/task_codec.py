"""The task formats: runtime/tasks.jsonl records, archive records, completion signals.

The one place that knows Bernstein's TaskRecord keys (reference §2.4) and the
seed-001 completion-signal keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from console.model import ArchiveRecord, CompletionSignal, Task
from console.records import NO_ITEMS
from console.sdd.fields import (
    RecordError,
    int_or,
    mapping,
    opt_epoch,
    opt_float,
    opt_int,
    opt_str,
    req_str,
    str_or,
    str_tuple,
)

#: TaskRecord keys in Bernstein's writer order (reference §2.4).
BERNSTEIN_TASK_KEYS = (
    "id", "title", "description", "role", "priority", "scope", "complexity",
    "estimated_minutes", "status", "task_type", "upgrade_details", "depends_on",
    "parent_task_id", "depends_on_repo", "owned_files", "assigned_agent", "result_summary",
    "tenant_id", "cell_id", "repo", "batch_eligible", "eu_ai_act_risk", "approval_required",
    "risk_level", "slack_context", "version", "claimed_at", "completed_at", "closed_at",
    "claimed_by_session", "parent_session_id", "subtask_wait_started_at", "retry_count",
    "max_retries", "retry_delay_s", "terminal_reason", "max_output_tokens", "meta_messages",
    "metadata",
)
#: Keys Bernstein drops that we keep (DESIGN §3).
OUR_TASK_KEYS = ("created_at", "deadline", "model", "effort", "completion_signals")
#: Keys Bernstein 3.23's writer adds (reference/bernstein-observed.md): not modelled,
#: kept in Task.extra as any other key is, and so written back as they were
BERNSTEIN_LATER_KEYS = ("parent_context", "max_turns")
_MODELLED = frozenset(BERNSTEIN_TASK_KEYS) | frozenset(OUR_TASK_KEYS)

SIGNAL_TYPES = frozenset(
    {"path_exists", "glob_exists", "test_passes", "file_contains", "api_responds",
     "llm_review", "llm_judge"}
)
# seed 001 writes signals with a named key instead of `value`
_SEED_VALUE_KEYS = {
    "path_exists": ("path",),
    "glob_exists": ("glob", "pattern", "path"),
    "test_passes": ("command", "cmd"),
    "api_responds": ("url",),
    "llm_review": ("prompt", "instruction", "criteria"),
    "llm_judge": ("criteria", "prompt"),
}


def decode_signal(raw: object) -> CompletionSignal:
    if not isinstance(raw, dict):
        raise RecordError(f"completion signal: expected an object, got {raw!r:.40}")
    kind = req_str(raw, "type")
    if kind not in SIGNAL_TYPES:
        raise RecordError(f"completion signal type '{kind}' is not one of "
                          + ", ".join(sorted(SIGNAL_TYPES)))
    expected = opt_int(raw, "status") if kind == "api_responds" else None
    value = opt_str(raw, "value")
    if value is None and kind == "file_contains":
        path, needle = opt_str(raw, "path"), opt_str(raw, "contains")
        if path is None or needle is None:
            raise RecordError("completion signal file_contains needs 'value' "
                              "('path :: needle') or 'path' and 'contains'")
        value = f"{path} :: {needle}"
    for key in _SEED_VALUE_KEYS.get(kind, ()):
        if value is None:
            value = opt_str(raw, key)
    if value is None or not value.strip():
        raise RecordError(f"completion signal {kind} has no value")
    if kind == "file_contains" and " :: " not in value:
        raise RecordError(f"completion signal file_contains value {value!r:.60} "
                          "is not 'path :: needle'")
    return CompletionSignal(kind, value, 200 if kind == "api_responds" and expected is None
                            else expected)


def decode_signals(raw: object, key: str) -> tuple[CompletionSignal, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RecordError(f"field '{key}': expected a list of signals, got {raw!r:.40}")
    return tuple(decode_signal(item) for item in raw)


def encode_signal(signal: CompletionSignal) -> dict[str, Any]:
    out: dict[str, Any] = {"type": signal.type, "value": signal.value}
    if signal.expected_status is not None:
        out["status"] = signal.expected_status
    return out


def decode_task(d: Mapping[str, Any]) -> Task:
    """A full TaskRecord (any Bernstein version, or ours) → Task. Raises RecordError."""
    metadata = mapping(d, "metadata")
    deadline = opt_epoch(d, "deadline")
    if deadline is None and "deadline" in metadata:
        deadline = opt_epoch(metadata, "deadline")
    return Task(
        id=req_str(d, "id"),
        title=req_str(d, "title"),
        status=req_str(d, "status"),
        description=str_or(d, "description", ""),
        role=str_or(d, "role", "backend"),
        priority=int_or(d, "priority", 2),
        scope=str_or(d, "scope", "medium"),
        complexity=str_or(d, "complexity", "medium"),
        estimated_minutes=opt_int(d, "estimated_minutes"),
        task_type=str_or(d, "task_type", "standard"),
        depends_on=str_tuple(d, "depends_on"),
        parent_task_id=opt_str(d, "parent_task_id"),
        owned_files=str_tuple(d, "owned_files"),
        assigned_agent=opt_str(d, "assigned_agent"),
        result_summary=opt_str(d, "result_summary"),
        tenant_id=str_or(d, "tenant_id", "default"),
        version=int_or(d, "version", 1),
        created_at=opt_epoch(d, "created_at"),
        claimed_at=opt_epoch(d, "claimed_at"),
        completed_at=opt_epoch(d, "completed_at"),
        closed_at=opt_epoch(d, "closed_at"),
        claimed_by_session=opt_str(d, "claimed_by_session"),
        retry_count=int_or(d, "retry_count", 0),
        max_retries=int_or(d, "max_retries", 3),
        terminal_reason=opt_str(d, "terminal_reason"),
        deadline=deadline,
        model=opt_str(d, "model"),
        effort=opt_str(d, "effort"),
        completion_signals=decode_signals(d.get("completion_signals"), "completion_signals"),
        metadata=metadata,
        extra=MappingProxyType({k: v for k, v in d.items() if k not in _MODELLED}),
    )


class TaskWire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A runtime/tasks.jsonl line in the strict shape decode_task takes as it is: each
    key Bernstein or we write, with the types they write (a large project's task log,
    a block at once: typed_block.TASKS). Any other key or type: decode_task."""

    id: str
    title: str
    status: str
    description: str | None = None
    role: str | None = None
    priority: int | None = None
    scope: str | None = None
    complexity: str | None = None
    estimated_minutes: int | None = None
    task_type: str | None = None
    depends_on: list[str] | None = None
    parent_task_id: str | None = None
    owned_files: list[str] | None = None
    assigned_agent: str | None = None
    result_summary: str | None = None
    tenant_id: str | None = None
    version: int | None = None
    created_at: float | None = None
    claimed_at: float | None = None
    completed_at: float | None = None
    closed_at: float | None = None
    claimed_by_session: str | None = None
    retry_count: int | None = None
    max_retries: int | None = None
    terminal_reason: str | None = None
    deadline: float | None = None
    model: str | None = None
    effort: str | None = None
    completion_signals: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    # Bernstein's keys that Task does not model (decode_task drops them too; a writer
    # puts their defaults back)
    upgrade_details: Any = None
    depends_on_repo: Any = None
    cell_id: Any = None
    repo: Any = None
    batch_eligible: Any = None
    eu_ai_act_risk: Any = None
    approval_required: Any = None
    risk_level: Any = None
    slack_context: Any = None
    parent_session_id: Any = None
    subtask_wait_started_at: Any = None
    retry_delay_s: Any = None
    max_output_tokens: Any = None
    meta_messages: Any = None
    # Bernstein 3.23's (BERNSTEIN_LATER_KEYS): kept in extra when the line has them
    parent_context: Any = msgspec.UNSET
    max_turns: Any = msgspec.UNSET


def _task_from_wire(w: TaskWire) -> Task:
    """What decode_task makes of the line `w` was decoded from (RecordError: that line
    goes through decode_task instead)."""
    _required(w)
    metadata = w.metadata
    deadline = w.deadline
    if deadline is None and metadata and "deadline" in metadata:
        deadline = opt_epoch(metadata, "deadline")
    signals = w.completion_signals
    return Task(
        id=w.id, title=w.title, status=w.status,
        description="" if w.description is None else w.description,
        role="backend" if w.role is None else w.role,
        priority=2 if w.priority is None else w.priority,
        scope="medium" if w.scope is None else w.scope,
        complexity="medium" if w.complexity is None else w.complexity,
        estimated_minutes=w.estimated_minutes,
        task_type="standard" if w.task_type is None else w.task_type,
        depends_on=() if w.depends_on is None else tuple(w.depends_on),
        parent_task_id=w.parent_task_id,
        owned_files=() if w.owned_files is None else tuple(w.owned_files),
        assigned_agent=w.assigned_agent, result_summary=w.result_summary,
        tenant_id="default" if w.tenant_id is None else w.tenant_id,
        version=1 if w.version is None else w.version,
        created_at=w.created_at, claimed_at=w.claimed_at, completed_at=w.completed_at,
        closed_at=w.closed_at, claimed_by_session=w.claimed_by_session,
        retry_count=0 if w.retry_count is None else w.retry_count,
        max_retries=3 if w.max_retries is None else w.max_retries,
        terminal_reason=w.terminal_reason, deadline=deadline, model=w.model,
        effort=w.effort,
        completion_signals=decode_signals(signals, "completion_signals") if signals else (),
        metadata=NO_ITEMS if metadata is None else MappingProxyType(metadata),
        extra=_later_keys(w),  # (a key of no one's: decode_task)
    )


def _later_keys(w: TaskWire) -> MappingProxyType[str, Any]:
    """BERNSTEIN_LATER_KEYS the line has, as decode_task keeps them in Task.extra."""
    if w.parent_context is msgspec.UNSET and w.max_turns is msgspec.UNSET:
        return NO_ITEMS
    return MappingProxyType({key: value for key, value in (
        ("parent_context", w.parent_context), ("max_turns", w.max_turns))
        if value is not msgspec.UNSET})


class Replaced(msgspec.Struct, frozen=True, gc=False):
    """A task log line that a later line of its block replaces (the log holds every
    change of a task): checked as _task_from_wire checks a line, but not made a Task.
    The State takes its problems, and its place among the block's changes for `last`,
    the Task the block leaves (kinds._add_task)."""

    id: str
    status: str
    last: Task


def tasks_from_wire(lines: list[TaskWire]) -> list[Task | Replaced] | None:
    """A block's tasks (typed_block.TASKS), or None: read it line by line."""
    last = {w.id: index for index, w in enumerate(lines)}
    try:
        made = {index: _task_from_wire(lines[index]) for index in last.values()}
        return [made[index] if last[w.id] == index else _replaced(w, made[last[w.id]])
                for index, w in enumerate(lines)]
    except Exception:  # (RecordError, or anything else: the line path says what it is)
        return None


def _replaced(w: TaskWire, last: Task) -> Replaced:
    """`w`, replaced by `last`, when _task_from_wire takes it (RecordError if not)."""
    if (w.completion_signals or (w.deadline is None and w.metadata
                                 and "deadline" in w.metadata)):
        _task_from_wire(w)  # (what can raise beyond the strings: decoding these)
    else:
        _required(w)
    return Replaced(w.id, w.status, last)


def _required(w: TaskWire) -> None:
    """decode_task's required strings, as written: none blank (RecordError if one is)."""
    if not (w.id.strip() and w.title.strip() and w.status.strip()):
        raise RecordError("an empty required string")


def encode_task(task: Task) -> dict[str, Any]:
    """Task → a full record in Bernstein's key order, plus the keys we keep."""
    extra = dict(task.extra)
    known: dict[str, Any] = {
        "id": task.id, "title": task.title, "description": task.description,
        "role": task.role, "priority": task.priority, "scope": task.scope,
        "complexity": task.complexity, "estimated_minutes": task.estimated_minutes,
        "status": task.status, "task_type": task.task_type,
        "depends_on": list(task.depends_on), "parent_task_id": task.parent_task_id,
        "owned_files": list(task.owned_files), "assigned_agent": task.assigned_agent,
        "result_summary": task.result_summary, "tenant_id": task.tenant_id,
        "version": task.version, "claimed_at": task.claimed_at,
        "completed_at": task.completed_at, "closed_at": task.closed_at,
        "claimed_by_session": task.claimed_by_session, "retry_count": task.retry_count,
        "max_retries": task.max_retries, "terminal_reason": task.terminal_reason,
        "metadata": dict(task.metadata),
    }
    defaults: dict[str, Any] = {
        "upgrade_details": None, "depends_on_repo": None, "cell_id": None, "repo": None,
        "batch_eligible": False, "eu_ai_act_risk": "minimal", "approval_required": False,
        "risk_level": "low", "slack_context": None, "parent_session_id": None,
        "subtask_wait_started_at": None, "retry_delay_s": 0.0, "max_output_tokens": None,
        "meta_messages": [],
    }
    record = {key: known[key] if key in known else extra.pop(key, defaults[key])
              for key in BERNSTEIN_TASK_KEYS}
    if task.created_at is not None:  # Bernstein's Task.from_dict keeps a null here as is
        record["created_at"] = task.created_at
    record.update(
        deadline=task.deadline, model=task.model, effort=task.effort,
        completion_signals=[encode_signal(s) for s in task.completion_signals],
    )
    record.update(extra)
    return record


def decode_archive(d: Mapping[str, Any]) -> ArchiveRecord:
    return ArchiveRecord(
        task_id=req_str(d, "task_id"),
        title=str_or(d, "title", ""),
        role=str_or(d, "role", ""),
        status=req_str(d, "status"),
        created_at=opt_epoch(d, "created_at"),
        completed_at=opt_epoch(d, "completed_at"),
        duration_seconds=opt_float(d, "duration_seconds"),
        result_summary=opt_str(d, "result_summary"),
        cost_usd=opt_float(d, "cost_usd"),
    )


__all__ = [
    "BERNSTEIN_TASK_KEYS", "SIGNAL_TYPES", "decode_archive", "decode_signal",
    "decode_signals", "decode_task", "encode_signal", "encode_task",
]
