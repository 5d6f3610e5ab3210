"""Tickets in backlog/open/ become tasks; dependencies block and unblock them.

A ticket that cannot be parsed, names an unknown dependency, reuses an id or
closes a dependency cycle stays where it is and is reported once (file and
reason). An ingested ticket moves to backlog/claimed/. A ticket without an id
gets one derived from its file name and content, so a crash between creating
the task and moving the file never creates it twice. Tickets are read and moved
through the backlog directories' descriptors (console.engine.backlog): a ticket that
is a link is refused unread, and a directory swapped for a link redirects nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import msgspec

from console.engine.backlog import Backlog, backlog_dir
from console.engine.errors import EngineError, IllegalTransition
from console.engine.events import EventLog
from console.engine.store import TaskStore
from console.model import DEAD_ENDS, SUCCEEDED, Task, TaskState, Ticket
from console.sdd.confine import SddDir, UnsafeId, UnsafePath, safe_id
from console.sdd.fields import brief
from console.sdd.paths import SddPaths
from console.sdd.tickets import MAX_TICKET_BYTES, TICKET_SUFFIXES, TicketError, parse_ticket

#: the result_summary of a task whose dependencies are not done yet
WAITING = "waiting for "
ROLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True, slots=True)
class Candidate:
    path: Path
    ticket: Ticket
    task_id: str


def ticket_id(ticket: Ticket, path: Path, data: bytes) -> str:
    if ticket.ticket_id:
        return ticket.ticket_id
    return hashlib.sha1(path.name.encode() + b"\0" + data).hexdigest()[:12]


def task_from_ticket(candidate: Candidate, status: TaskState, reason: str | None,
                     now: float, claimed_name: str) -> Task:
    t = candidate.ticket
    deadline = t.deadline
    if deadline is None and t.sla_minutes is not None:
        deadline = now + t.sla_minutes * 60
    metadata: dict[str, object] = {"ticket": f"claimed/{claimed_name}", "tags": list(t.tags),
                                   "ticket_type": t.task_type}
    if t.sla_minutes is not None:
        metadata["sla_minutes"] = t.sla_minutes
    if t.require_review:
        metadata["require_review"] = True
    if t.max_retries is not None:  # the ticket's own limit; else the ladder decides
        metadata["retry_limit"] = t.max_retries
    task = Task(
        id=candidate.task_id, title=t.title, description=t.description, role=t.role,
        status=status.value, priority=t.priority, scope=t.scope, complexity=t.complexity,
        estimated_minutes=t.estimated_minutes, depends_on=t.depends_on, owned_files=t.files,
        result_summary=reason, created_at=now, deadline=deadline, model=t.model, effort=t.effort,
        completion_signals=t.completion_signals, metadata=MappingProxyType(metadata),
        extra=MappingProxyType({"approval_required": t.require_human_approval,
                                **({"cli": t.cli} if t.cli else {})}),
    )
    if t.max_retries is not None:  # Bernstein's field, written as the ticket set it
        task = msgspec.structs.replace(task, max_retries=t.max_retries)
    return task


def _cycle(start: str, edges: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A dependency cycle through `start`, as a path that ends where it began."""
    parent: dict[str, str] = {}
    stack = [start]
    while stack:
        node = stack.pop()
        for dep in edges.get(node, ()):
            if dep == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
            if dep not in parent:
                parent[dep] = node
                stack.append(dep)
    return None


class Ingestor:
    def __init__(self, store: TaskStore, paths: SddPaths, events: EventLog,
                 holder: Callable[[str, str], str | None] | None = None) -> None:
        self.holder = holder or (lambda task_id, title: None)  # phase gates (missions.py)
        self.store = store
        self.paths = paths
        self.events = events
        self._reported: dict[str, str] = {}  # file → last reason said, so it is said once
        self._bad_content: dict[str, tuple[int, int]] = {}  # unreadable file → (mtime, size)

    def _refuse(self, path: Path, reason: str, *, content: SddDir | None = None) -> None:
        """Say once why a ticket stays in open/; `content` (its directory): it cannot be
        read or parsed, so there is no point reading it again until the file changes."""
        display = self.paths.display(path)
        info = content.lstat(path.name) if content is not None else None
        if info is not None:
            self._bad_content[display] = (info.st_mtime_ns, info.st_size)
        if self._reported.get(display) != reason:
            self._reported[display] = reason
            self.events.warning(f"ticket not ingested: {reason}", file=display)

    def _move(self, backlog: Backlog, path: Path, name: str) -> None:
        backlog.claim(path.name, name)
        self._reported.pop(self.paths.display(path), None)

    def pending(self) -> list[str]:
        """Ticket files in backlog/open/ not (yet) refused: work that may still arrive."""
        try:
            with backlog_dir(self.paths.root, "open") as directory:
                names = directory.names()
        except OSError:
            return []
        return sorted(n for n in names if n.endswith(TICKET_SUFFIXES) and not n.startswith(".")
                      and self.paths.display(self.paths.backlog_open / n) not in self._reported)

    def _unsafe(self, exc: UnsafePath) -> None:
        """A backlog directory (or .sdd/backlog) is a link: said once."""
        key = f"backlog: {exc}"
        if self._reported.get(key) != str(exc):
            self._reported[key] = str(exc)
            self.events.error(f"tickets not read: {exc}")

    def scan(self) -> list[Candidate]:
        try:
            with backlog_dir(self.paths.root, "open") as directory:
                return self._scan(directory)
        except UnsafePath as exc:
            self._unsafe(exc)
        except OSError:
            pass
        return []

    def _scan(self, directory: SddDir) -> list[Candidate]:
        found = []
        for name in sorted(directory.names()):
            if name.startswith(".") or not name.endswith(TICKET_SUFFIXES):
                continue
            path = self.paths.backlog_open / name
            display = self.paths.display(path)
            known_bad = self._bad_content.get(display)
            if known_bad is not None:
                info = directory.lstat(name)
                if info is None:
                    continue
                if (info.st_mtime_ns, info.st_size) == known_bad:
                    continue  # unchanged since it was refused for its content
                del self._bad_content[display]
            data, problem = directory.read(name, MAX_TICKET_BYTES)
            if problem is not None:
                self._refuse(path, problem, content=directory)
                continue
            if data is None:
                continue
            parsed = parse_ticket(data, display)
            if isinstance(parsed, TicketError):
                self._refuse(path, parsed.reason, content=directory)
                continue
            found.append(Candidate(path, parsed, ticket_id(parsed, path, data)))
        return found

    def ingest(self) -> list[Task]:
        """One pass over backlog/open/; returns the tasks created."""
        candidates = self.scan()
        if not candidates:
            return []
        try:
            with Backlog(self.paths.root) as backlog:
                return self._ingest(backlog, candidates)
        except UnsafePath as exc:
            self._unsafe(exc)
            return []

    def _ingest(self, backlog: Backlog, candidates: list[Candidate]) -> list[Task]:
        created: list[Task] = []
        with self.store.lock:
            existing = self.store.tasks
            batch: dict[str, Candidate] = {}
            for c in candidates:
                prior = existing.get(c.task_id)
                if prior is not None:
                    recorded = str(prior.metadata.get("ticket", ""))
                    leftover = (recorded == f"claimed/{c.path.name}"
                                and not backlog.taken(c.path.name))
                    if leftover:  # created just before a crash, never moved
                        self._move(backlog, c.path, c.path.name)
                    else:
                        self._refuse(c.path, f"a task with id {brief(c.task_id)} already exists "
                                             f"(from {recorded or 'another source'})")
                elif c.task_id in batch:
                    self._refuse(c.path, f"id {brief(c.task_id)} is also used by "
                                         f"{batch[c.task_id].path.name}")
                else:
                    batch[c.task_id] = c
            for tid, c in list(batch.items()):
                try:  # both become paths and branch names: the one confinement check
                    safe_id(tid, "ticket id")
                    if not ROLE.fullmatch(c.ticket.role):
                        raise UnsafeId(f"role {brief(c.ticket.role, 60)} must be letters, "
                                       "digits, '-' or '_'")
                except UnsafeId as exc:
                    self._refuse(c.path, str(exc))
                    del batch[tid]
            edges = {tid: t.depends_on for tid, t in existing.items()}
            edges.update({tid: c.ticket.depends_on for tid, c in batch.items()})
            for tid, c in list(batch.items()):
                cycle = _cycle(tid, edges)
                if cycle:
                    self._refuse(c.path, "dependency cycle " + " → ".join(cycle))
                    del batch[tid]
            changed = True
            while changed:  # a ticket whose dependency was refused waits too
                changed = False
                for tid, c in list(batch.items()):
                    unknown = [d for d in c.ticket.depends_on
                               if d not in existing and d not in batch]
                    if unknown:
                        self._refuse(c.path, "depends on unknown task " + ", ".join(
                            brief(u) for u in unknown[:5]) + (
                            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""))
                        del batch[tid]
                        changed = True
            now = self.store.clock()
            for index, c in enumerate(batch.values()):
                waiting = [d for d in c.ticket.depends_on
                           if d in batch or not satisfied(self.store, d)]
                gate = self.holder(c.task_id, c.ticket.title)
                # a task waiting on a dependency stays open (Bernstein's claim checks the
                # dependencies; its server never reopens a plain `blocked` one)
                status = TaskState.BLOCKED if gate else TaskState.OPEN
                reason = f"{WAITING}{', '.join(waiting)}" if waiting else None
                if gate:
                    reason = f"held by phase gate '{gate}'"
                name = backlog.claimed_name(c.path.name)
                try:  # file order breaks ties between tickets of one pass
                    task = task_from_ticket(c, status, reason, now + index * 1e-6, name)
                    if gate:
                        task = msgspec.structs.replace(task, metadata=MappingProxyType(
                            {**task.metadata, "held_by": gate}))
                    task = self.store.create(task)
                except EngineError as exc:
                    self._refuse(c.path, str(exc))
                    continue
                self._move(backlog, c.path, name)
                created.append(task)
        for task in created:
            self.events.info(f"ingested {task.id}: {task.title}", task_id=task.id)
        return created


#: Where Bernstein 3.23.0 puts a task whose dependency will never deliver: the
#: abandon cascade's state for a direct dependant of an abandoned task, the
#: failed-dependency cascade's (#3452) for every other dead end.
STRANDED = frozenset({TaskState.BLOCKED_BY_FAILED_DEP, TaskState.BLOCKED_BY_ABANDON})


def satisfied(store: TaskStore, dep_id: str) -> bool:
    """Done or closed, itself or a retry of it under another id (Bernstein's lineage)."""
    dep = store.tasks.get(dep_id)
    return (dep is not None and dep.status in SUCCEEDED) or any(
        retry.status in SUCCEEDED for retry in store.retries(dep_id))


def _retrying(store: TaskStore, dep_id: str) -> bool:
    return any(r.status not in DEAD_ENDS and r.state not in STRANDED
               for r in store.retries(dep_id))


def _blocker(store: TaskStore, task: Task) -> Task | None:
    """The dependency that strands `task`, as Bernstein's blocking_dependency picks it: a
    direct dependency that ended without delivering or is stranded itself (so a chain
    names its nearest link); with several, the lowest id."""
    found = sorted(d for d in task.depends_on if (dep := store.tasks.get(d)) is not None
                   and (dep.status in DEAD_ENDS or dep.state in STRANDED)
                   and not satisfied(store, d) and not _retrying(store, d))
    return store.tasks[found[0]] if found else None


def _strand(store: TaskStore, task: Task, blocker: Task) -> Task:
    """blocked → blocked_by_failed_dep | blocked_by_abandon, with the fields Bernstein
    3.23.0 writes there (it unblocks through them when the dependency is retried and
    done). Its table has no blocked → blocked_by_* edge, so the task passes through
    open, as Bernstein's own cascade takes it from open; both records are written
    under the store's lock, so nothing claims it in between."""
    abandoned = blocker.status == TaskState.ABANDONED.value
    state = TaskState.BLOCKED_BY_ABANDON if abandoned else TaskState.BLOCKED_BY_FAILED_DEP
    reason = (f"upstream {blocker.id} abandoned" if abandoned
              else f"dependency {blocker.id} is {blocker.status}")
    terminal = None if abandoned else "blocked_by_failed_dependency"
    if task.state is state:  # a nearer cause, or the same one again
        return store.update(task.id, result_summary=reason, terminal_reason=terminal,
                            metadata={"blocking_task_id": blocker.id})
    if task.state is not TaskState.OPEN:
        store.transition(task.id, TaskState.OPEN, reason=reason)
    return store.transition(task.id, state, reason=reason, terminal_reason=terminal,
                            metadata={"blocking_task_id": blocker.id})


def reconcile_blocked(store: TaskStore) -> list[Task]:
    """Open waiting tasks whose dependencies are all done; strand the ones a dependency
    will never satisfy (Bernstein 3.23.0's states); say why the others still wait."""
    changed: list[Task] = []
    with store.lock:
        moved = True
        while moved:  # a stranded task strands its own dependants on the next round
            moved = False
            waiting_tasks = [t for state in (TaskState.BLOCKED, TaskState.OPEN,
                                             *sorted(STRANDED))
                             for t in store.in_state(state)]
            for task in waiting_tasks:
                if not task.depends_on or task.metadata.get("held_by"):
                    continue  # no dependencies, or held by a phase gate (missions.py)
                deps = [(d, store.tasks.get(d)) for d in task.depends_on]
                missing = [d for d, t in deps if t is None]
                blocker = _blocker(store, task)
                waiting = [d for d, t in deps if t is not None and not satisfied(store, d)]
                try:
                    if missing:
                        reason = "dependency " + ", ".join(missing) + " does not exist"
                    elif blocker is not None:
                        if (task.state not in STRANDED
                                or task.metadata.get("blocking_task_id") != blocker.id):
                            changed.append(_strand(store, task, blocker))
                            moved = True
                        continue
                    elif waiting:  # a stranded task whose dependency was retried stays
                        reason = f"{WAITING}{', '.join(waiting)}"  # until it is done
                        if task.state is TaskState.BLOCKED:  # as an older engine wrote it
                            changed.append(store.transition(task.id, TaskState.OPEN,
                                                            reason=reason))
                            moved = True
                            continue
                    elif task.state is TaskState.OPEN:  # ready: the waiting note goes
                        if (task.result_summary or "").startswith(WAITING):
                            changed.append(store.update(task.id, result_summary=None))
                        continue
                    else:
                        changed.append(store.transition(
                            task.id, TaskState.OPEN, reason=None, result_summary=None,
                            terminal_reason=None,
                            metadata={"blocking_task_id": None} if task.state in STRANDED
                            else None))
                        moved = True
                        continue
                except IllegalTransition:
                    continue
                if task.result_summary != reason:
                    changed.append(store.update(task.id, result_summary=reason))
    return changed

