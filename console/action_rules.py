"""What each operator action may do to a task, asked before it is carried out.

The one home of the preconditions: the engine's operations refuse with these words,
and the console checks them before it opens a confirm, so a question is only asked
when the answer can be carried out (#19.7). A refusal names the state and the reason;
None means the action may go ahead.
"""

from __future__ import annotations

from console.model import DEFAULT_LADDER, Task, TaskState, next_model

CANCELLABLE = frozenset({TaskState.OPEN, TaskState.CLAIMED, TaskState.IN_PROGRESS,
                         TaskState.BLOCKED, TaskState.WAITING_FOR_SUBTASKS, TaskState.PLANNED,
                         TaskState.BLOCKED_BY_ABANDON, TaskState.BLOCKED_BY_FAILED_DEP,
                         TaskState.SUSPENDED})
ESCALATABLE = frozenset({TaskState.OPEN, TaskState.BLOCKED, TaskState.CLAIMED,
                         TaskState.IN_PROGRESS, TaskState.FAILED, TaskState.PLANNED})


def retry_refusal(task: Task) -> str | None:
    if task.state is TaskState.CANCELLED:
        return (f"task {task.id} is cancelled, which is terminal in Bernstein's state "
                "machine; retry is refused")
    if task.state is not TaskState.FAILED:
        return f"task {task.id} is {task.status}; only a failed task can be retried"
    return None


def current_model(task: Task, ladder: tuple[str, ...] = DEFAULT_LADDER) -> str:
    """The model an escalation starts from: the task's, its last attempt's, else the
    ladder's first rung."""
    return task.model or str(task.metadata.get("last_model") or ladder[0])


def escalate_refusal(task: Task, ladder: tuple[str, ...] = DEFAULT_LADDER,
                     model: str | None = None) -> str | None:
    if task.state not in ESCALATABLE:
        return (f"task {task.id} is {task.status}; only a task that will run again (open, "
                "blocked, claimed, running or failed) can be escalated")
    current = current_model(task, ladder)
    if model is None and next_model(current, ladder) is None:
        return f"task {task.id} already runs on the top tier ({current})"
    return None


def cancel_refusal(task: Task) -> str | None:
    if task.state not in CANCELLABLE:
        return (f"task {task.id} is {task.status}; only open, claimed, running, blocked or "
                "waiting tasks can be cancelled")
    return None
