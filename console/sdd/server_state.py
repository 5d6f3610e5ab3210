"""A Bernstein task server's snapshots into the State: its tasks (a page, or all of
them), its archive and its pending approvals. `State.apply_server_*` call these:
decoded here, stored where the files' records go, so every view reads one State
whatever the source."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from console.model import Approval, Problem
from console.sdd import task_codec
from console.sdd.delta import Delta
from console.sdd.fields import RecordError, req_str, str_or
from console.sdd.kinds import Section

if TYPE_CHECKING:
    from console.sdd.state import State


def server_tasks(state: State, display: str, records: list[Any], *,
                       complete: bool) -> Delta:
    """Task records as a task server returned them (its TaskResponse objects).

    `complete`: these are all the tasks there are, so every task not among
    them is removed, and `display`'s old problems are cleared. Only what
    differs from the state goes into the Delta, so a full re-sync after a
    stream gap costs the views nothing when nothing changed.
    """
    delta = Delta()
    if complete and display in state._problems:
        state._clear_problems(display)
        delta.sections.add(Section.PROBLEMS)
    seen: set[str] = set()
    for index, raw in enumerate(records, 1):
        try:
            if not isinstance(raw, dict):
                raise RecordError(f"expected a task object, got {raw!r:.40}")
            task = task_codec.decode_task(raw)
        except RecordError as exc:
            state._problem(Problem(display, index, str(exc)))
            delta.sections.add(Section.PROBLEMS)
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                seen.add(raw["id"])  # unreadable now is not gone: keep what we had
            continue
        seen.add(task.id)
        if state.tasks.get(task.id) != task:
            state._put_task(task, display, index, delta)
    if complete:
        for task_id in [t for t in state.tasks if t not in seen]:
            state._drop_task(task_id)
            delta.upserts.pop(task_id, None)
            delta.removed.add(task_id)
    return delta


def remove_task(state: State, task_id: str) -> Delta:
    """The task server says this task no longer exists (for this tenant)."""
    delta = Delta()
    if state._drop_task(task_id):
        delta.removed.add(task_id)
    return delta


def server_archive(state: State, display: str, records: list[Any]) -> Delta:
    """The archive as a task server lists it (replaces what was there)."""
    delta = Delta(sections={Section.ARCHIVE})
    state.archive.clear()
    state.archive_records = 0
    state._clear_problems(display)
    for index, raw in enumerate(records, 1):
        try:
            if not isinstance(raw, dict):
                raise RecordError(f"expected an archive record, got {raw!r:.40}")
            record = task_codec.decode_archive(raw)
        except RecordError as exc:
            state._problem(Problem(display, index, str(exc)))
            delta.sections.add(Section.PROBLEMS)
            continue
        state.archive[record.task_id] = record
        state.archive_records += 1
    return delta


def server_approvals(state: State, display: str, items: list[Any]) -> Delta:
    """A task server's pending approvals (replaces them); section "approvals"."""
    delta = Delta()
    found: dict[str, Approval] = {}
    for index, raw in enumerate(items, 1):
        try:
            if not isinstance(raw, dict):
                raise RecordError(f"expected an approval object, got {raw!r:.40}")
            approval = Approval(
                task_id=req_str(raw, "task_id"), title=str_or(raw, "task_title", ""),
                session_id=str_or(raw, "session_id", ""),
                mechanism=str_or(raw, "mechanism", "task_review"),
                diff=str_or(raw, "diff", ""), test_summary=str_or(raw, "test_summary", ""),
                prompt=str_or(raw, "prompt", ""), unblocks=str_or(raw, "unblocks", ""))
        except RecordError as exc:
            state._problem(Problem(display, index, str(exc)))
            delta.sections.add(Section.PROBLEMS)
            continue
        found[approval.task_id] = approval
    if found != state.approvals:
        state.approvals = found
        delta.sections.add(Section.APPROVALS)
    return delta
