"""The engine's task store: the one place a task's state changes.

Every change goes through `transition` (state changes, checked against the
transition table) or `update` (other fields); each appends the full record to
runtime/tasks.jsonl, and terminal changes also append an archive record. The
in-memory map and the file never disagree because both change under one lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any

import msgspec

from console.engine.errors import EngineError, IllegalTransition
from console.model import TRANSITIONS, Problem, Task, TaskState
from console.sdd.fields import RecordError
from console.sdd.fileio import append_jsonl
from console.sdd.kinds import KINDS
from console.sdd.paths import Kind, SddPaths
from console.sdd.tail import JsonlTail
from console.sdd.task_codec import encode_task

ARCHIVED_STATES = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})
_COMPLETING = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})


def archive_record(task: Task, now: float | None = None) -> dict[str, Any]:
    """Bernstein's ArchiveRecord (reference §2.5).

    Bernstein 3.23.0 answers `GET /tasks/archive` through a TypedDict whose
    created_at, completed_at and duration_seconds are required floats: one null on
    one line turns the whole archive into a 500. A task Bernstein created carries no
    created_at in its task log, so the earliest moment the record shows it existed
    (claimed, else completed) stands in for it; every time here is a real one.
    """
    completed = task.completed_at if task.completed_at is not None else (
        now if now is not None else time.time())
    known = [t for t in (task.created_at, task.claimed_at) if t is not None]
    created = known[0] if known else completed
    return {
        "task_id": task.id, "title": task.title, "role": task.role, "status": task.status,
        "created_at": created, "completed_at": completed,
        "duration_seconds": round(max(0.0, completed - created), 3),
        "result_summary": task.result_summary, "cost_usd": None,
        "assigned_agent": task.assigned_agent, "owned_files": list(task.owned_files),
        "tenant_id": task.tenant_id or "default", "claimed_by_session": task.claimed_by_session,
    }


#: the metadata keys by which a retry under a new id names its original (Bernstein's
#: `satisfied_dependency_ids` resolves a dependency through both)
LINEAGE_KEYS = ("original_task_id", "retry_of")


class TaskStore:
    """Tasks as the engine owns them; readers elsewhere see the same file."""

    def __init__(self, paths: SddPaths, *, clock: Callable[[], float] = time.time,
                 fsync: bool = True) -> None:
        self.paths = paths
        self.clock = clock
        self.fsync = fsync
        self.lock = threading.RLock()
        self.tasks: dict[str, Task] = {}
        self._by_status: dict[str, dict[str, None]] = {}  # status → ids (insertion-ordered)
        self._retries: dict[str, dict[str, None]] = {}  # original id → its retries' ids
        self.problems: list[Problem] = []
        self._listeners: list[Callable[[Task], None]] = []

    def load(self) -> None:
        """Replay runtime/tasks.jsonl: the last full record per id wins."""
        path = self.paths.of(Kind.TASKS)
        display = self.paths.display(path)
        tail = JsonlTail(path, display)
        with self.lock:
            self.tasks.clear()
            while True:
                batch = tail.read(8 * 1024 * 1024)
                if batch.file_error:
                    raise EngineError(f"{display} {batch.file_error}")
                self.problems.extend(batch.problems)
                for line, raw in batch.records:
                    try:
                        task = KINDS[Kind.TASKS].decoder(raw)
                    except RecordError as exc:
                        self.problems.append(Problem(display, line, str(exc)))
                        continue
                    self.tasks[task.id] = task
                if not batch.more:
                    break
            self._by_status.clear()
            self._retries.clear()
            for task in self.tasks.values():
                self._by_status.setdefault(task.status, {})[task.id] = None
                self._index_lineage(task)

    def _index_lineage(self, task: Task) -> None:
        """A retry Bernstein made under a new id names its original in its metadata."""
        for key in LINEAGE_KEYS:
            original = task.metadata.get(key)
            if isinstance(original, str) and original and original != task.id:
                self._retries.setdefault(original, {})[task.id] = None

    def on_change(self, listener: Callable[[Task], None]) -> None:
        self._listeners.append(listener)

    def get(self, task_id: str) -> Task:
        with self.lock:
            try:
                return self.tasks[task_id]
            except KeyError:
                raise EngineError(f"no task with id '{task_id}'") from None

    def in_state(self, state: TaskState) -> list[Task]:
        """Tasks in one state, without scanning the others."""
        with self.lock:
            return [self.tasks[i] for i in self._by_status.get(state.value, {})]

    def count(self, state: TaskState) -> int:
        with self.lock:
            return len(self._by_status.get(state.value, {}))

    def snapshot(self) -> list[Task]:
        with self.lock:
            return list(self.tasks.values())

    # -- the only writers of task records --------------------------------------

    def _write(self, task: Task, *, archive: bool = False) -> Task:
        append_jsonl(self.paths.of(Kind.TASKS), [encode_task(task)], fsync=self.fsync)
        if archive:
            append_jsonl(self.paths.of(Kind.ARCHIVE), [archive_record(task, self.clock())],
                         fsync=self.fsync)
        old = self.tasks.get(task.id)
        if old is not None:
            self._by_status.get(old.status, {}).pop(task.id, None)
        self._by_status.setdefault(task.status, {})[task.id] = None
        self.tasks[task.id] = task
        self._index_lineage(task)
        for listener in self._listeners:
            listener(task)
        return task

    def create(self, task: Task) -> Task:
        with self.lock:
            if task.id in self.tasks:
                raise EngineError(f"a task with id '{task.id}' already exists")
            if task.state is None:
                raise EngineError(f"task {task.id}: unknown state '{task.status}'")
            return self._write(msgspec.structs.replace(
                task, version=1, created_at=task.created_at or self.clock()))

    def transition(self, task_id: str, dst: TaskState, *, reason: str | None = None,
                   metadata: dict[str, Any] | None = None, **changes: Any) -> Task:
        """Move a task to `dst` or raise IllegalTransition naming both states."""
        with self.lock:
            task = self.get(task_id)
            src = task.state
            if src is None:
                raise IllegalTransition(
                    f"task {task_id} is in state '{task.status}', which no transition leaves")
            if dst not in TRANSITIONS[src]:
                allowed = ", ".join(sorted(s.value for s in TRANSITIONS[src])) or "nothing"
                raise IllegalTransition(
                    f"task {task_id}: {src.value} → {dst.value} is not allowed "
                    f"({src.value} can go to: {allowed})")
            now = self.clock()
            stamps: dict[str, Any] = {}
            if dst is TaskState.CLAIMED:
                stamps["claimed_at"] = now
            if dst in _COMPLETING:
                stamps["completed_at"] = now
            if dst is TaskState.CLOSED:
                stamps["closed_at"] = now
            if dst is TaskState.OPEN:
                stamps.update(completed_at=None)
            if reason is not None:
                stamps["result_summary"] = reason
            return self._write(self._changed(task, metadata, status=dst.value, **stamps,
                                             **changes), archive=dst in ARCHIVED_STATES)

    def update(self, task_id: str, *, metadata: dict[str, Any] | None = None,
               **changes: Any) -> Task:
        """Change fields other than the state; `status` is refused here."""
        if "status" in changes:
            raise EngineError("state changes go through transition()")
        with self.lock:
            return self._write(self._changed(self.get(task_id), metadata, **changes))

    @staticmethod
    def _changed(task: Task, metadata: dict[str, Any] | None, **changes: Any) -> Task:
        if metadata is not None:
            merged = dict(task.metadata)
            merged.update(metadata)
            changes["metadata"] = MappingProxyType(merged)
        return msgspec.structs.replace(task, version=task.version + 1, **changes)

    # -- queries ---------------------------------------------------------------

    def children(self, task_id: str) -> Iterable[Task]:
        with self.lock:
            return [t for t in self.tasks.values() if t.parent_task_id == task_id]

    def retries(self, task_id: str) -> list[Task]:
        """The tasks that retry `task_id` under another id (its lineage)."""
        with self.lock:
            return [self.tasks[i] for i in self._retries.get(task_id, {})]

    def dependants(self, task_id: str) -> Iterable[Task]:
        with self.lock:
            return [t for t in self.tasks.values() if task_id in t.depends_on]
