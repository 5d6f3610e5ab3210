"""The engine as a worker of a Bernstein task server (`run --server URL`).

It joins the server as a node, claims tasks for its roles with the node id as the
claim's owner, and runs each one exactly as a local task: the claimed task is written
to this clone's own task log and the embedded engine runs it (worktree, agent, janitor,
gates, cascade with reflections, review, SLA), landing its work through the shared git
remote (`SharedRemoteRepo`). What the engine does is reported back as it happens:
`/progress` for each attempt and retry, then `complete` with the landing commit and a
summary that carries the gate verdicts, or `fail` with the reason. A claimed task's
signals that would run a command or fetch a URL here are dropped, in one line, unless
the trusted local bernstein.yaml allows them (cluster_signals).

Fail safe: a server that stops answering pauses claiming (reports wait, with backoff);
a stop releases what was claimed but not started and, by `on_stop`, lets running
attempts finish or kills and releases them; a restart after a kill releases what the
last run held (the node leaves and joins again). The server reaps a dead node's claims.
The server is reached only through a `Coordinator` (injected by the command line, so
the engine imports no HTTP); its errors come as `ServerAway`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.engine.cluster_report import (
    Coordinator,
    LiveProgress,
    ReportQueue,
    ServerAway,
    mirror_claim,
    outcome_of,
    progress_of,
    worker_mark,
)
from console.engine.cluster_signals import local_policy, policy_line, screen_claim
from console.engine.engine import Engine
from console.engine.errors import EngineError, IllegalTransition
from console.engine.gitops import GitRepo
from console.engine.shared_remote import SharedRemoteRepo, task_of_branch
from console.model import Task, TaskState
from console.sdd.confine import is_safe_id
from console.sdd.server_signals import ServerSignalPolicy

#: local states a held task is still being worked on in
WORKING = (TaskState.OPEN, TaskState.CLAIMED, TaskState.IN_PROGRESS)
MAX_BACKOFF_S = 30.0


class ClusterEngine(Engine):
    """The embedded engine, landing through the shared remote and running only what the
    worker holds from the server (local tickets wait for a local engine)."""

    def __init__(self, root: Path, *, admit: Callable[[Task], bool], remote: str = "origin",
                 **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        self.admit = admit
        self.remote = remote

    def make_repo(self) -> GitRepo:
        return SharedRemoteRepo(self.paths.root, self.config.base_branch, remote=self.remote)

    def _claimable(self, task: Task) -> bool:
        return self.admit(task) and super()._claimable(task)


@dataclass(slots=True)
class Held:
    """A server task this worker claimed, and what the server has been told of it."""

    task_id: str
    role: str
    claimed_at: float
    said: str = ""  # the last progress line queued


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    done: int = 0
    failed: int = 0
    released: int = 0
    duplicates_avoided: int = 0


class ClusterWorker:
    def __init__(self, root: Path, server: Coordinator, *, name: str, workers: int | None,
                 roles: tuple[str, ...] = (), until_idle: bool = False,
                 on_stop: str = "finish", heartbeat_s: float = 2.0, poll_s: float = 0.5,
                 say: Callable[[str], None] = print, engine_echo: Callable | None = None,
                 remote: str = "origin") -> None:
        self.server = server
        self.name = name
        self.roles = roles
        self.until_idle = until_idle
        self.on_stop = on_stop
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self.say = say
        self.held: dict[str, Held] = {}
        self.lock = threading.RLock()
        self.stats = WorkerStats()
        self.stopping = threading.Event()  # stop claiming; finish or release, then leave
        self.away_since: float | None = None
        self.backoff_s = 0.0
        self.engine = ClusterEngine(root, admit=self._admits, remote=remote, workers=workers,
                                    echo=engine_echo)
        self.workers = self.engine.workers  # --workers, else bernstein.yaml's, else 2
        self.reports = ReportQueue()
        self.live = LiveProgress(root, name)  # its agents' telemetry, now and then
        self._last_beat = 0.0
        self._last_busy = 0
        self._joined = False
        self._refused = ""
        self.signals = ServerSignalPolicy()  # what server-supplied signals may run: run()

    # -- life cycle ----------------------------------------------------------------------

    def run(self) -> int:
        """Until stopped (or idle with until_idle); returns the tasks that failed."""
        self.engine.start()
        repo = self.engine.repo
        assert isinstance(repo, SharedRemoteRepo)
        repo.landing_id = self._landing_id
        self.engine.store.on_change(self._changed)
        self.signals = local_policy(self.engine.paths.root, self.engine.config.server_signals,
                                    vouched=self.engine.trusted)
        self.say(f"worker {self.name}: {self.workers} slot(s), roles "
                 f"{', '.join(self.roles) or 'any'}, landing on {repo.remote}/{repo.base} "
                 f"({repo.remote_url}); {policy_line(self.signals)}")
        try:
            self._release_leftovers()
            quiet = 0
            while True:
                self._step()
                if self.stopping.is_set() and not self._busy():
                    break
                if self.until_idle and not self.stopping.is_set():
                    quiet = quiet + 1 if self._idle() else 0
                    if quiet >= 3:
                        self.say(f"worker {self.name}: nothing left to claim; leaving")
                        break
                time.sleep(self.poll_s if self.away_since is None else self.backoff_s)
        finally:
            self._leave()
        return self.stats.failed

    def stop(self, *, release_running: bool = False) -> None:
        """Stop claiming; release what has not started; running attempts finish (or, with
        `release_running` / on_stop=release, are killed and released)."""
        first = not self.stopping.is_set()
        self.stopping.set()
        if release_running or self.on_stop == "release":
            for task_id in list(self.held):
                running = self.engine.running.get(task_id)
                if running is not None:  # killed, and its task reopened (not cancelled)
                    running.stopping = True
                    running.cancel.set()
        if first:
            self.say(f"worker {self.name}: stopping — releasing unstarted claims, "
                     + ("releasing running ones" if self.on_stop == "release"
                        or release_running else "letting running attempts finish"))

    def _leave(self) -> None:
        self.stopping.set()
        with self.lock:
            for task_id in list(self.held):
                self._give_back(task_id, "worker stopped before finishing it")
        self.engine.stop()
        self._flush(final=True)
        with contextlib.suppress(ServerAway):
            self.server.leave()
        self.say(f"worker {self.name}: left — claimed {self.stats.claimed}, done "
                 f"{self.stats.done}, failed {self.stats.failed}, released "
                 f"{self.stats.released}")

    # -- one step ------------------------------------------------------------------------

    def _step(self) -> None:
        self._collect()
        if self.stopping.is_set():  # what has not started (or was stopped) goes back
            with self.lock, self.engine.store.lock:  # the engine dispatches under it
                for task_id in [t for t in self.held if t not in self.engine.running]:
                    task = self.engine.store.tasks.get(task_id)
                    if task is None or task.state in (TaskState.OPEN, TaskState.CLAIMED):
                        self._give_back(task_id, "worker stopping; not started here")
        if not self._flush():
            return
        try:
            self._beat()
            if not self.stopping.is_set():
                self._claim()
            self._back()
        except ServerAway as exc:
            if exc.unreachable:
                self._away(str(exc))
            elif str(exc) != self._refused:  # a refusal is said once, not every step
                self._refused = str(exc)
                self.say(f"worker {self.name}: the server refused: {exc}")

    def _beat(self) -> None:
        now = time.monotonic()
        busy = len(self.held)
        if now - self._last_beat < self.heartbeat_s and self._joined \
                and busy == self._last_busy:  # a change of load is said at once
            return
        self._last_busy = busy
        if not self._joined or not self.server.heartbeat(self.workers, busy):
            node = self.server.join(self.workers, busy)
            if node is not None and not self._joined:
                # the node is the clone's (same name and identity on every start): leaving
                # once makes the server reopen whatever an earlier run of it still held
                # (work of it already on the remote is found by its trailer, not redone)
                self.server.leave()
                node = self.server.join(self.workers, busy)
            self._joined = True
            self.say(f"worker {self.name}: joined {self.server.url} as node {node}" if node
                     else f"worker {self.name}: the server has no node registry; plain claims")
        for running in list(self.engine.running.values()):
            held = self.held.get(running.task_id)
            if held is not None:
                self.server.agent_heartbeat(running.session, held.role)
                self._live(held, running.session)
        self._last_beat = now

    def _live(self, held: Held, session: str) -> None:
        """Its agent's tokens, cost and action, now and then, as a progress line."""
        task = self.engine.store.tasks.get(held.task_id)
        attempt = int(task.metadata.get("attempt") or 0) if task is not None else 0
        line = self.live.line(held.task_id, session, attempt)
        if line is not None and line[0] != held.said:
            held.said = line[0]
            self.reports.progress(held.task_id, *line)

    def _owner(self) -> str:
        return self.server.node_id or self.engine.session

    def _roles(self) -> list[str]:
        if self.roles:
            return list(self.roles)
        return sorted(role for role in self.server.open_roles() if is_safe_id(role))

    def _claim(self) -> None:
        if self.engine.paused or self.engine.writes.problem is not None:
            return
        for role in self._roles():
            while len(self.held) < self.workers and not self.stopping.is_set():
                task = self.server.next_task(role, self._owner())
                if task is None:
                    break
                self._take(task)

    def _take(self, task: Task) -> None:
        self.stats.claimed += 1
        if not (is_safe_id(task.id) and is_safe_id(task.role)):
            self.reports.fail(task.id, f"worker {self.name}: task id or role is not a safe id")
            return
        repo = self.engine.repo
        assert isinstance(repo, SharedRemoteRepo)
        landed = None
        with contextlib.suppress(EngineError):
            repo.fetch()
            landed = repo.landed(task.id)
        if landed is not None:  # pushed by a worker that died before it could report
            self.stats.duplicates_avoided += 1
            self.stats.done += 1
            self.reports.progress(task.id, f"claimed {worker_mark(self.name)}", 5)
            self.reports.complete(task.id, f"already on {repo.remote}/{repo.base} at "
                                           f"{landed[:12]} (landed before; not run again); "
                                           f"worker {self.name}", repo.base, landed)
            self.say(f"done {task.id}: its work was already on {repo.remote}/{repo.base} "
                     f"at {landed[:12]}; not run again")
            return
        task, dropped = screen_claim(task, self.signals)  # the server's signals are data
        with self.lock:
            try:
                mirror_claim(self.engine.store, task, {
                    "server": self.server.url, "node": self._owner(), "worker": self.name,
                    **({"dropped_signals": dropped} if dropped else {})})
            except EngineError as exc:
                self.reports.release(task.id, f"worker {self.name} cannot run it: {exc}")
                return
            self.held[task.id] = Held(task.id, task.role, time.time())
        self.engine.wake.set()
        self.say(f"claimed {task.id} ({task.role}): {task.title[:70]}")
        self.reports.progress(task.id, f"claimed {worker_mark(self.name)}", 5)
        if dropped:
            self.say(dropped)
            self.reports.progress(task.id, f"{dropped} {worker_mark(self.name)}", 5)

    def _admits(self, task: Task) -> bool:
        return task.id in self.held and not self.stopping.is_set()

    def _landing_id(self, branch: str) -> str | None:
        task_id = task_of_branch(branch)
        return task_id if task_id is not None and task_id in self.held else None

    # -- reporting -----------------------------------------------------------------------

    def _changed(self, task: Task) -> None:
        """Each change of a held task, as the engine writes it (in its thread, under the
        store's lock): every attempt, retry and escalation becomes a progress line."""
        held = self.held.get(task.id)
        if held is None or task.state not in WORKING:
            return
        line = progress_of(task, self.name)
        if line is not None and line[0] != held.said:
            held.said = line[0]
            self.reports.progress(task.id, *line)

    def _collect(self) -> None:
        """How each held task the engine finished ended, queued for the server."""
        repo = self.engine.repo
        assert isinstance(repo, SharedRemoteRepo)
        with self.lock:
            for task_id in list(self.held):
                task = self.engine.store.tasks.get(task_id)
                if task is None or task.state in WORKING:
                    continue
                verdict = outcome_of(self.engine.paths, task, self.name, repo.landed_at,
                                     repo.base)
                if verdict.ok:
                    self.stats.done += 1
                    self.reports.complete(task_id, verdict.summary, verdict.branch,
                                          verdict.sha)
                else:
                    self.stats.failed += 1
                    self.reports.fail(task_id, verdict.summary)
                self.say(f"{'done' if verdict.ok else 'failed'} {task_id}: "
                         f"{verdict.summary[:160]}")
                del self.held[task_id]

    def _give_back(self, task_id: str, why: str) -> None:
        """A held task this worker will not finish: off the local log's runnable set,
        released on the server."""
        store = self.engine.store
        with contextlib.suppress(EngineError, IllegalTransition, KeyError):
            if store.tasks[task_id].state in (TaskState.OPEN, TaskState.CLAIMED):
                store.transition(task_id, TaskState.FAILED, reason=f"released: {why}")
        if self.held.pop(task_id, None) is not None:
            self.stats.released += 1
            self.reports.release(task_id, f"worker {self.name}: {why}")

    def _back(self) -> None:
        if self.away_since is not None:
            self.say(f"worker {self.name}: server answering again after "
                     f"{time.monotonic() - self.away_since:.0f} s; claiming resumes")
        self.away_since = None
        self.backoff_s = 0.0

    def _away(self, why: str) -> None:
        if self.away_since is None:
            self.away_since = time.monotonic()
            self.say(f"worker {self.name}: server away ({why}); claiming paused, running "
                     "attempts go on, reports wait")
        self.backoff_s = min(MAX_BACKOFF_S, max(0.5, self.backoff_s * 2))

    def _flush(self, *, final: bool = False) -> bool:
        """Send the waiting reports, in order; False when the server is away."""
        try:
            self.reports.send(self.server)
        except ServerAway as exc:
            if final:
                self.say(f"worker {self.name}: {len(self.reports)} report(s) could not be "
                         f"sent ({exc}); the server's node reaper reopens those tasks")
            else:
                self._away(str(exc))
            return False
        return True

    # -- restart and idleness ----------------------------------------------------------

    def _release_leftovers(self) -> None:
        """The local records of tasks a killed run of this worker held stop being
        runnable; the server's side is `_beat`'s first join."""
        for task in self.engine.store.snapshot():
            cluster = task.metadata.get("cluster")
            if isinstance(cluster, dict) and task.state in WORKING \
                    and cluster.get("server") == self.server.url:
                with contextlib.suppress(EngineError, IllegalTransition):
                    self.engine.store.transition(task.id, TaskState.FAILED,
                                                 reason="released: the worker restarted")
                self.say(f"released {task.id}: held by this worker before it restarted")

    def _busy(self) -> bool:
        return bool(self.held) or bool(self.engine.running) or len(self.reports) > 0

    def _idle(self) -> bool:
        if self._busy() or self.away_since is not None:
            return False
        try:
            return self.server.unfinished(set(self.roles) or None) == 0
        except ServerAway:
            return False
