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
from console.sdd.agent_live import forget_agents
from console.sdd.confine import UnsafePath, real_dir, sdd_path
from console.sdd.paths import SddPaths


def settle(task: Task, store: TaskStore, repo: GitRepo, events: EventLog,
           reopen: Callable[[Task, str], None], cause: str) -> None:
    """A task left claimed or in progress by an attempt that is gone (`cause`: "the engine
    stopped"): done when its merge landed, else its cut-short chain attempt marked and
    the task reopened."""
    branch = str(task.metadata.get("branch", ""))
    if task.state is TaskState.IN_PROGRESS and branch and repo.is_merged(branch):
        store.transition(task.id, TaskState.DONE, reason=f"merged before {cause} (recovered)")
        events.warning(f"{task.id}: its merge landed before {cause}; marked done",
                       task_id=task.id)
        return
    chain = [dict(a) for a in (task.metadata.get("chain") or [])]
    if chain and chain[-1].get("success") is None:  # cut short: not a real try
        chain[-1].update(success=False, interrupted=True,
                         escalation_reason=f"interrupted: {cause}")
        store.update(task.id, metadata={"chain": chain})
    reopen(store.get(task.id), f"recovered: {cause} during its attempt")
    if branch:
        repo.delete_branch(branch)
    events.warning(f"{task.id} was {task.status} when {cause}; reopened",
                   task_id=task.id)


def recover(paths: SddPaths, store: TaskStore, repo: GitRepo, events: EventLog,
            reopen: Callable[[Task, str], None]) -> None:
    """Undo what a stopped engine left half-done; `reopen` is the engine's own."""
    reap_orphans(paths, events)
    forget_agents(paths.root)  # its agents' telemetry: none of them runs any more
    for note in repo.recover():
        events.warning(note)
    for task in store.snapshot():
        if task.state in (TaskState.CLAIMED, TaskState.IN_PROGRESS):
            settle(task, store, repo, events, reopen, "the engine stopped")
    listed = repo.worktrees()
    for folder in ("worktrees", "sandboxes"):  # attempts' and evolution sandboxes
        try:
            directory = sdd_path(paths.root, folder, what=f".sdd/{folder}")
        except UnsafePath as exc:
            events.error(f"recovery skipped: {exc}")
            continue
        for path in sorted(directory.iterdir()) if real_dir(directory) else []:
            # only what git registered as a worktree and is a real directory: a planted
            # link or a stray folder is left alone (and said once)
            if path not in listed or not real_dir(path):
                if real_dir(path) or path.is_symlink():
                    events.warning(f"recovery left {paths.display(path)} alone: not a "
                                   "worktree the engine created")
                continue
            branch_name = f"evolution/{path.name}" if folder == "sandboxes" else None
            try:
                repo.remove_worktree(path, branch_name)
            except OSError as exc:
                events.error(f"recovery could not remove {paths.display(path)}: {exc}")
    repo.prune()
