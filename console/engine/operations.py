"""Operator actions on a task store: retry, escalate, cancel.

Shared by the running engine and by the file-only control, so an action means
the same thing whoever carries it out. Refusals name the state and the reason.
"""

from __future__ import annotations

from collections.abc import Callable

from console.action_rules import (
    CANCELLABLE,
    cancel_refusal,
    current_model,
    escalate_refusal,
    retry_refusal,
)
from console.control import Outcome
from console.engine.errors import EngineError, IllegalTransition
from console.engine.store import TaskStore
from console.model import Ladders, TaskState, effort_of, next_model


def retry(store: TaskStore, task_id: str) -> Outcome:
    """failed → open with retry_count + 1 (Bernstein's batch-ops retry); same id."""
    try:
        task = store.get(task_id)
        refusal = retry_refusal(task)
        if refusal is not None:
            return Outcome.refused(refusal)
        store.transition(task_id, TaskState.OPEN, assigned_agent=None, result_summary=None,
                         retry_count=task.retry_count + 1)
    except EngineError as exc:
        return Outcome.refused(str(exc))
    last = task.metadata.get("last_model")
    start = (f"on its pinned model {task.model}" if task.model else
             "from the cheapest tier the router allows" + (
                 f", not on {last} where it last ran (e escalates instead)" if last else ""))
    return Outcome.done(f"task {task_id} is open again (retry {task.retry_count + 1}); "
                        f"a new chain starts {start}")


def escalate(store: TaskStore, task_id: str, model: str | None = None,
             ladders: Ladders | None = None) -> Outcome:
    """The next attempt runs on a stronger model (on the ladder of the task's adapter);
    a failed task is reopened for it."""
    try:
        task = store.get(task_id)
        ladder = (ladders or Ladders()).of(task)
        refusal = escalate_refusal(task, ladder, model)
        if refusal is not None:
            return Outcome.refused(refusal)
        current = current_model(task, ladder)
        target = model or (next_model(current, ladder) or ("", 0))[0]
        effort = effort_of(target)
        meta = {"escalated_from": current, "next_model": target, "next_effort": effort,
                "next_kind": "agent", "next_by_operator": task.state is TaskState.IN_PROGRESS,
                "next_reason": f"escalated by the operator from {current}"}
        if task.state is TaskState.FAILED:
            store.transition(task_id, TaskState.OPEN, model=target, assigned_agent=None,
                             result_summary=None, retry_count=task.retry_count + 1,
                             metadata=meta)
            return Outcome.done(f"task {task_id} reopened on {target} (was {current})")
        store.update(task_id, model=target, metadata=meta)
    except EngineError as exc:
        return Outcome.refused(str(exc))
    when = "its running attempt finishes on the old model; the next" if (
        task.state is TaskState.IN_PROGRESS) else "the next attempt"
    return Outcome.done(f"task {task_id}: {when} runs on {target} (was {current})")


def cancel(store: TaskStore, task_id: str, reason: str,
           stop_agent: Callable[[str], None] | None = None) -> Outcome:
    """Cancel the task and its subtasks (Bernstein's cascade); kill running agents."""
    try:
        root = store.get(task_id)
        refusal = cancel_refusal(root)
        if refusal is not None:
            return Outcome.refused(refusal)
        cancelled = []
        with store.lock:
            todo = [root]
            while todo:
                task = todo.pop()
                todo.extend(store.children(task.id))
                if task.state not in CANCELLABLE:
                    continue
                try:
                    store.transition(task.id, TaskState.CANCELLED,
                                     reason=reason if task.id == task_id
                                     else f"cancelled with parent {task_id}: {reason}")
                except IllegalTransition:
                    continue
                cancelled.append(task.id)
        if stop_agent is not None:
            for tid in cancelled:
                stop_agent(tid)
    except EngineError as exc:
        return Outcome.refused(str(exc))
    extra = f" and {len(cancelled) - 1} subtask(s)" if len(cancelled) > 1 else ""
    return Outcome.done(f"task {task_id}{extra} cancelled: {reason}")
