"""Start-up recovery from a crashed predecessor engine.

Orphaned agents are killed, tasks it had claimed are reopened (or marked done when
their merge already landed), a chain attempt it cut short is recorded as interrupted,
and its worktrees, sandboxes and branches are removed.
"""

from __future__ import annotations

from collections.abc import Callable

from console.engine.events import EventLog
from console.engine.gitops import GitRepo
from console.engine.orphans import reap_orphans
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.paths import SddPaths


def recover(paths: SddPaths, store: TaskStore, repo: GitRepo, events: EventLog,
            reopen: Callable[[Task, str], None]) -> None:
    """Undo what a stopped engine left half-done; `reopen` is the engine's own."""
    reap_orphans(paths, events)
    for note in repo.recover():
        events.warning(note)
    for task in store.snapshot():
        if task.state not in (TaskState.CLAIMED, TaskState.IN_PROGRESS):
            continue
        branch = str(task.metadata.get("branch", ""))
        if task.state is TaskState.IN_PROGRESS and branch and repo.is_merged(branch):
            store.transition(task.id, TaskState.DONE,
                             reason="merged before the engine stopped (recovered)")
            events.warning(f"{task.id}: its merge landed before the engine stopped; "
                           "marked done", task_id=task.id)
            continue
        chain = [dict(a) for a in (task.metadata.get("chain") or [])]
        if chain and chain[-1].get("success") is None:  # cut short: not a real try
            chain[-1].update(success=False, interrupted=True,
                             escalation_reason="interrupted: the engine stopped")
            store.update(task.id, metadata={"chain": chain})
        reopen(store.get(task.id), "recovered: the engine that ran it stopped")
        if branch:
            repo.delete_branch(branch)
        events.warning(f"{task.id} was {task.status} by a stopped engine; reopened",
                       task_id=task.id)
    for folder in ("worktrees", "sandboxes"):  # attempts' and evolution sandboxes
        directory = paths.sdd / folder
        for path in sorted(directory.iterdir()) if directory.is_dir() else []:
            if path.is_dir():
                branch_name = f"evolution/{path.name}" if folder == "sandboxes" else None
                repo.remove_worktree(path, branch_name)
    repo.prune()
