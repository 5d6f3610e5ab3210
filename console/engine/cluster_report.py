"""A cluster worker's link to its server: the `Coordinator` interface it is given (the
command line injects console.remote.cluster's client; the engine imports no HTTP), the
`ServerAway` error that interface raises, a claimed task's copy in the local task log,
what the worker reports about a task, and the queue that holds reports until the server
takes them (in order; a server that is away keeps the rest waiting, one that refuses a
single report drops only that one)."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import msgspec

from console.engine.errors import EngineError
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.agent_live import decode, spending
from console.sdd.fields import RecordError
from console.sdd.metric_codec import decode_gate_report
from console.sdd.paths import SddPaths
from console.sdd.task_live import read_heartbeat

MAX_REPORT_BYTES = 1_000_000  # a gate report read back for the summary


class ServerAway(Exception):
    """A request to the server failed; `unreachable`: no answer at all (or a 5xx)."""

    def __init__(self, message: str, *, unreachable: bool = True) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class Coordinator(Protocol):
    """The server, as a worker needs it (console.remote.cluster.ClusterClient's surface)."""

    url: str
    node_id: str | None

    def join(self, slots: int, busy: int) -> str | None: ...
    def heartbeat(self, slots: int, busy: int) -> bool: ...
    def leave(self) -> None: ...
    def next_task(self, role: str, owner: str) -> Task | None: ...
    def open_roles(self) -> set[str]: ...
    def unfinished(self, roles: set[str] | None) -> int: ...
    def progress(self, task_id: str, message: str, percent: int) -> None: ...
    def complete(self, task_id: str, summary: str, branch: str | None,
                 sha: str | None) -> None: ...
    def fail(self, task_id: str, reason: str) -> None: ...
    def release(self, task_id: str, reason: str) -> None: ...
    def agent_heartbeat(self, session: str, role: str) -> None: ...


def mirror_claim(store: TaskStore, task: Task, cluster: dict[str, str]) -> None:
    """The claimed task into the clone's task log, open, with only `cluster` as metadata
    (the server's cannot steer the engine); its dependencies are the server's business
    (it hands out only tasks whose dependencies are done). A task claimed again reopens
    its local record, with this claim's completion signals (`task`'s, already screened:
    cluster_signals); EngineError when that record cannot be reopened."""
    with store.lock:
        old = store.tasks.get(task.id)
        if old is None:
            store.create(msgspec.structs.replace(
                task, status=TaskState.OPEN.value, depends_on=(), parent_task_id=None,
                claimed_at=None, claimed_by_session=None, assigned_agent=None,
                result_summary=None, completed_at=None,
                metadata=MappingProxyType({"cluster": cluster})))
            return
        if old.state is TaskState.DONE:
            store.transition(task.id, TaskState.FAILED, reason="claimed again")
        elif old.state not in (TaskState.FAILED, TaskState.OPEN):
            raise EngineError(f"its local record is {old.status}")
        signals = task.completion_signals  # never an earlier record's
        if store.get(task.id).state is TaskState.FAILED:
            store.transition(task.id, TaskState.OPEN, metadata={"cluster": cluster},
                             completion_signals=signals)
        else:
            store.update(task.id, metadata={"cluster": cluster}, completion_signals=signals)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    summary: str
    branch: str | None = None
    sha: str | None = None


def worker_mark(name: str) -> str:
    return f"(worker {name})"


def progress_of(task: Task, name: str) -> tuple[str, int] | None:
    """The progress line for a task still being worked on, or None (nothing new)."""
    attempt = int(task.metadata.get("attempt") or 0)
    model = task.metadata.get("last_model") or task.model or "?"
    if task.state is TaskState.IN_PROGRESS:
        return f"attempt {attempt} on {model} {worker_mark(name)}", min(80, 10 + 20 * attempt)
    if task.state is TaskState.OPEN and attempt and task.result_summary:
        return f"{task.result_summary} {worker_mark(name)}", min(80, 10 + 20 * attempt)
    return None


#: a held task's live telemetry goes to the server at most this often (each line stays in
#: the task's progress_log)
LIVE_EVERY_S = 15.0


class LiveProgress:
    """What a held task's agent is doing and spending, as a progress line for the server
    (`POST /tasks/{id}/progress`: `attempt 1 on sonnet: 12.3k in (9.0k cached) / 600
    out, $0.0421 est. · tool: Edit … (worker w1)`), from its heartbeat's telemetry
    (engine/agents/telemetry.py): first LIVE_EVERY_S after the agent is seen, then at
    most that often, and only once it has spent something."""

    def __init__(self, root: Path, name: str, every_s: float = LIVE_EVERY_S) -> None:
        self.root, self.name, self.every_s = root, name, every_s
        self._due: dict[str, float] = {}  # task id → monotonic time of its next line

    def line(self, task_id: str, session: str, attempt: int) -> tuple[str, int] | None:
        now = time.monotonic()
        if len(self._due) > 4096:  # a long-lived worker: the tasks of an hour ago are gone
            self._due = {k: due for k, due in self._due.items() if due > now - 3600}
        if now < self._due.setdefault(task_id, now + self.every_s):
            return None
        beat, _problem = read_heartbeat(self.root, session)
        raw = beat.get("telemetry") if beat else None
        agent = decode(session, raw) if isinstance(raw, dict) else None
        if agent is None or not (agent.tokens_in or agent.tokens_out or agent.last):
            return None
        self._due[task_id] = now + self.every_s
        item = agent.as_json()
        text = f"attempt {attempt} on {agent.model or '?'}: {spending(item)}" + (
            f" · {agent.last}" if agent.last else "")
        pct = beat.get("progress_pct") if beat else None
        return f"{text} {worker_mark(self.name)}", \
            pct if isinstance(pct, int) and 0 <= pct <= 100 else 10


def gate_verdicts(paths: SddPaths, task_id: str) -> str:
    """`gates: lint pass, tests fail (required)` from the task's gate report, or ''."""
    path = paths.gates_dir / f"{task_id}.json"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_REPORT_BYTES + 1)
        if len(raw) > MAX_REPORT_BYTES:
            return "gates: report too large to summarise"
        report = decode_gate_report(json.loads(raw))
    except FileNotFoundError:
        return ""
    except (OSError, ValueError, RecordError, RecursionError, AttributeError):
        return "gates: report unreadable"
    parts = [f"{r.name} {r.status}" + (" (required)" if r.required and r.blocked else "")
             for r in report.results]
    verdict = "passed" if report.overall_pass else "BLOCKED"
    return f"gates {verdict}: " + ", ".join(parts) if parts else ""


def outcome_of(paths: SddPaths, task: Task, name: str, landed_at: Mapping[str, str],
               base: str) -> Verdict:
    """How a task the engine finished ends on the server, with its evidence."""
    branch = str(task.metadata.get("branch") or "")
    chain = task.metadata.get("last_chain") or task.metadata.get("chain") or []
    attempts = len(chain) if isinstance(chain, list) else 0
    model = task.metadata.get("last_model") or task.model or "?"
    parts = [task.result_summary or task.status,
             f"worker {name}, {attempts or 1} attempt(s), last on {model}"]
    gates = gate_verdicts(paths, task.id)
    if gates:
        parts.append(gates)
    sha = landed_at.get(branch)
    if task.state is TaskState.DONE:
        if sha:
            parts.append(f"attempt branch {branch}")
        # agent_branch: the remote base the work landed on (Bernstein fetches a branch
        # only when it starts with agent/, so it never merges this a second time)
        return Verdict(True, "; ".join(parts), branch=base if sha else None, sha=sha)
    return Verdict(False, "; ".join(parts))


class ReportQueue:
    """Reports in the order they were made; sent by `send`, kept while the server is away."""

    def __init__(self) -> None:
        self._queue: deque[tuple[str, str, tuple[Any, ...]]] = deque()
        self.dropped: list[str] = []  # reports the server refused (one line each)

    def __len__(self) -> int:
        return len(self._queue)

    def progress(self, task_id: str, message: str, percent: int) -> None:
        self._queue.append(("progress", task_id, (message, percent)))

    def complete(self, task_id: str, summary: str, branch: str | None,
                 sha: str | None) -> None:
        self._queue.append(("complete", task_id, (summary, branch, sha)))

    def fail(self, task_id: str, reason: str) -> None:
        self._queue.append(("fail", task_id, (reason,)))

    def release(self, task_id: str, reason: str) -> None:
        self._queue.append(("release", task_id, (reason,)))

    def send(self, server: Coordinator) -> None:
        """Send in order; raises ServerAway (the rest kept) when the server is away."""
        while self._queue:
            verb, task_id, args = self._queue[0]
            try:
                getattr(server, verb)(task_id, *args)
            except ServerAway as exc:
                if exc.unreachable:
                    raise
                self.dropped.append(f"{verb} {task_id}: {exc}")
            self._queue.popleft()
