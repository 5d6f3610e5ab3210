"""The engine: a tick thread that ingests, unblocks and dispatches, and N worker threads.

Only one engine runs a project at a time (`EngineLock`). On start it recovers
from a crashed predecessor (`recovery.recover`). `stop()` kills running agents and
puts their tasks back to open.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from console.control import Outcome
from console.engine import evolution_apply, inbox, operations
from console.engine.agents.process import scrubbed_env
from console.engine.attempt import AttemptRunner, Running, new_session
from console.engine.cascade import Bandit, CascadeRouter, parse_cascade
from console.engine.chain import ChainKeeper
from console.engine.errors import EngineError, IllegalTransition
from console.engine.events import EventLog
from console.engine.evolution_apply import EvolutionConfig, parse_evolution
from console.engine.gates.cache import GateCache
from console.engine.gates.pipeline import GatePipeline, load_gate_setup
from console.engine.gates.plugins import PluginError
from console.engine.gitops import GitRepo
from console.engine.ingest import SATISFIED, Ingestor, close_ticket, reconcile_blocked
from console.engine.janitor import Janitor
from console.engine.llm import LlmClient
from console.engine.lock import EngineLock
from console.engine.missions import MissionKeeper, load_missions, mission_deadlines
from console.engine.orphans import PROJECT_MARKER, protect_environment
from console.engine.recovery import recover
from console.engine.reflection import Reflector
from console.engine.review import MultiJudgeReview, parse_review
from console.engine.sla import SlaMonitor, parse_sla
from console.engine.store import TaskStore
from console.model import EngineEvent, EngineStatus, Task, TaskState
from console.sdd.fileio import append_jsonl, atomic_write_json, atomic_write_text
from console.sdd.gate_config import GateConfigError
from console.sdd.metric_codec import encode_engine_status
from console.sdd.paths import Kind, SddPaths
from console.sdd.project_config import DEFAULT_ENV_ALLOW, ProjectConfig, load_config
from console.sdd.skeleton import init_project
from console.sdd.tail import JsonlTail

TICK_S = 0.2


class Engine:
    def __init__(self, root: Path, *, workers: int | None = None,
                 config: ProjectConfig | None = None,
                 echo: Callable[[EngineEvent], None] | None = None, fsync: bool = True) -> None:
        self.paths = SddPaths(root.resolve())
        self.config = config if config is not None else load_config(self.paths.root)
        self.workers = max(1, workers or self.config.workers or 2)
        self.session = f"engine-{uuid.uuid4().hex[:8]}"
        self.events = EventLog(self.paths, echo=echo)
        self.fsync = fsync
        self.lock = EngineLock(self.paths)
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.paused = False
        self.running: dict[str, Running] = {}
        self._dirty = True  # a task changed since the last reconcile
        self._evolve_due = False  # evolution.on_idle: propose once each time work runs out
        self.evolution = EvolutionConfig()
        self._evolution_lock = threading.Lock()  # one approve/evolve at a time
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._published: tuple[int, int, bool, bool] | None = None
        self.store: TaskStore
        self.repo: GitRepo

    # -- life cycle ------------------------------------------------------------

    def start(self, *, create: bool = True) -> None:
        """Take ownership and start the threads; raises OwnedElsewhere or EngineError."""
        if not self.paths.sdd.is_dir() and not create:
            raise EngineError(f"no .sdd/ in {self.paths.root}; the engine starts once "
                              "the project is initialised (bernstein-tui init)")
        self.repo = GitRepo(self.paths.root, self.config.base_branch)  # before writing anything
        self.repo.on_note = self.events.warning  # agents' git config put back: said once
        protect_environment()
        if not self.paths.sdd.is_dir():
            init_project(self.paths.root)
        self.lock.acquire()
        try:
            for warning in self.config.warnings:
                self.events.warning(warning.reason, file=warning.file)
            self.store = TaskStore(self.paths, fsync=self.fsync)
            self.store.load()
            self.store.on_change(self._changed)
            self._ignore_worktrees()
            recover(self.paths, self.store, self.repo, self.events, self._reopen)
            env = scrubbed_env(DEFAULT_ENV_ALLOW, {PROJECT_MARKER: str(self.paths.root),
                                                   "PYTHONDONTWRITEBYTECODE": "1"})
            llm = LlmClient(self.config.llm, on_call=self._llm_call)
            janitor = Janitor(llm, test_timeout_s=self.config.test_timeout_s, env=env)
            self.runner = AttemptRunner(self.paths, self.store, self.repo, self.config, janitor,
                                        self.events, self.session, self._chains(llm),
                                        self._gate_pipeline(llm), self._review(llm))
            try:
                sla = parse_sla(self.config.raw.get("sla"))
            except Exception as exc:
                raise EngineError(f"bernstein.yaml: {exc}") from None
            self.sla = SlaMonitor(self.paths, self.store, self.events, sla, self.stop_agent)
            missions, problems = load_missions(self.paths, self.config.raw.get("missions"))
            for problem in problems:
                self.events.warning(f"mission not loaded: {problem}")
            self.missions = MissionKeeper(self.paths, self.store, self.events, missions)
            try:
                self.evolution = parse_evolution(self.config.raw.get("evolution"))
            except Exception as exc:
                raise EngineError(f"bernstein.yaml: {exc}") from None
            self.ingestor = Ingestor(self.store, self.paths, self.events, self.missions.holder)
        except BaseException:
            self.lock.release()
            raise
        for index in range(self.workers):
            self._spawn(self._worker, f"engine-worker-{index}")
        self._publish_status()
        self._spawn(self._tick_loop, "engine-tick")
        self.events.info(f"engine started: {self.workers} worker(s), base branch "
                         f"'{self.repo.base}'")

    def _llm_call(self, record: dict) -> None:
        append_jsonl(self.paths.sdd / "metrics" / "llm_calls.jsonl", [record], fsync=False)

    def _chains(self, llm: LlmClient) -> ChainKeeper:
        """The cascade (unless `cascade: {enabled: false}`), bandit and reflection memory."""
        raw = self.config.raw.get("cascade")
        try:
            cascade = parse_cascade(raw, self.config.raw.get("complexity"))
        except Exception as exc:  # any malformed value: one line naming the section
            raise EngineError(f"bernstein.yaml: cascade/complexity: {exc}") from None
        enabled = not (isinstance(raw, dict) and raw.get("enabled") is False)
        bandit = Bandit(self.paths.sdd / "routing" / "cascade_bandit.json", cascade)
        router = CascadeRouter(cascade, bandit) if enabled else None
        reflector = Reflector(self.paths, llm, on_note=lambda m: self.events.warning(m))
        tail = JsonlTail(self.paths.of(Kind.REFLECTIONS))
        reflector.remember([record for _, record in tail.read().records])
        self.reflector = reflector
        return ChainKeeper(self.paths, self.store, router, cascade, reflector, self.events)

    def _review(self, llm: LlmClient) -> MultiJudgeReview | None:
        try:
            config = parse_review(self.config.raw.get("review"))
        except Exception as exc:
            raise EngineError(f"bernstein.yaml: review: {exc}") from None
        return MultiJudgeReview(llm, config)

    def _gate_pipeline(self, llm: LlmClient) -> GatePipeline | None:
        """quality_gates from bernstein.yaml, plugins included; None when switched off."""
        try:
            setup = load_gate_setup(self.paths.root, self.config.raw.get("quality_gates"))
        except (GateConfigError, PluginError) as exc:
            raise EngineError(str(exc)) from None
        if not setup.config.enabled or not setup.config.pipeline:
            return None
        caching = self.paths.sdd / "caching"
        # the tools run the agent's code (its tests): the same scrubbed environment as agents
        env = scrubbed_env((*DEFAULT_ENV_ALLOW, *self.config.agents.env),
                           {PROJECT_MARKER: str(self.paths.root)})
        return GatePipeline(setup, llm, cache=GateCache(caching / "gates",
                                                        setup.config.cache_max_entries),
                            state_dir=caching, env=env,
                            log_dir=self.paths.sdd / "runtime" / "gate-logs")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        """Kill running agents, reopen their tasks, release the project."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        for running in list(self.running.values()):
            running.stopping = True
            running.cancel.set()
        for _ in range(self.workers):
            self._queue.put(None)
        self.wake.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        # tasks claimed but never started go back to open too
        for task in self.store.snapshot():
            if task.state is TaskState.CLAIMED:
                self._reopen(task, "engine stopped before the attempt started")
        self._publish_status(running=False)
        self.events.info("engine stopped")
        self.lock.release()

    def _ignore_worktrees(self) -> None:
        ignore = self.paths.sdd / "worktrees" / ".gitignore"
        if not ignore.exists():
            atomic_write_text(ignore, "*\n")

    def _reopen(self, task: Task, why: str) -> None:
        try:
            self.store.transition(task.id, TaskState.OPEN, assigned_agent=None,
                                  result_summary=why)
        except IllegalTransition as exc:
            self.events.error(str(exc), task_id=task.id)

    # -- the loops -------------------------------------------------------------

    def _tick_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.tick()
            except Exception as exc:  # the loop must survive anything one tick hits
                self.events.error(f"engine tick failed: {type(exc).__name__}: {exc}")
            self.wake.wait(TICK_S)
            self.wake.clear()

    def _changed(self, task: Task) -> None:
        self._dirty = True
        self._evolve_due = self.evolution.on_idle
        self.wake.set()
        close_ticket(self.paths, task)

    def tick(self) -> None:
        self.ingestor.ingest()
        if self._dirty:
            self._dirty = False
            self.missions.tick()  # holds first, so a held task is never reopened
            reconcile_blocked(self.store)
        inbox.drain(self.paths, self._from_inbox)
        if self.sla.due():
            self.sla.check()
            self.sla.check_missions(mission_deadlines(self.missions))
        if not self.paused and not self.stopping.is_set():
            self._dispatch()
        self._publish_status()
        if self._evolve_due and self._idle_apart_from_evolution():
            self._evolve_due = False
            with self._evolution_lock:
                outcome = self._evolution("evolve", {})
            self.events.info(f"evolution (on idle): {outcome.message.splitlines()[0]}")

    def _claimable(self, task: Task) -> bool:
        if task.state is not TaskState.OPEN or task.id in self.running \
                or task.metadata.get("held_by") or self.missions.holder(task.id, task.title):
            return False
        deps = self.store.tasks
        return all(d in deps and deps[d].status in SATISFIED for d in task.depends_on)

    def _dispatch(self) -> None:
        free = self.workers - len(self.running)
        if free <= 0:
            return
        with self.store.lock:
            ready = sorted((t for t in self.store.in_state(TaskState.OPEN)
                            if self._claimable(t)),
                           key=lambda t: (t.priority, t.created_at or 0.0, t.id))
            for task in ready[:free]:
                self.store.transition(task.id, TaskState.CLAIMED,
                                      claimed_by_session=self.session)
                self.running[task.id] = Running(task.id, new_session(task.role),
                                                threading.Event())
                self._queue.put(task.id)

    def _worker(self) -> None:
        while True:
            task_id = self._queue.get()
            if task_id is None:
                return
            running = self.running[task_id]
            try:
                if self.stopping.is_set():
                    continue
                self.runner.run(running)
            except Exception as exc:
                self.events.error(f"attempt for {task_id} crashed: {type(exc).__name__}: {exc}",
                                  task_id=task_id)
                with contextlib.suppress(EngineError):
                    self.store.transition(task_id, TaskState.FAILED,
                                          reason=f"engine error: {type(exc).__name__}: {exc}")
            finally:
                self.running.pop(task_id, None)
                self.wake.set()

    # -- status and control ----------------------------------------------------

    def _publish_status(self, *, running: bool = True) -> None:
        """runtime/engine_status.json, rewritten only when something in it changed."""
        now = (self.workers, len(self.running), self.paused, running)
        if now == self._published:
            return
        self._published = now
        status = EngineStatus(pid=os.getpid(), workers=self.workers, busy=len(self.running),
                              paused=self.paused, running=running, base=self.repo.base,
                              updated_at=time.time())
        try:
            atomic_write_json(self.paths.of(Kind.ENGINE_STATUS), encode_engine_status(status))
        except OSError as exc:
            self.events.warning(f"{self.paths.display(self.paths.of(Kind.ENGINE_STATUS))}: "
                                f"not written: {exc}")

    def is_idle(self) -> bool:
        """Nothing running, nothing claimable, no ticket waiting, no evolution pass due."""
        return not self._evolve_due and self._idle_apart_from_evolution()

    def _idle_apart_from_evolution(self) -> bool:
        if self.running or not self._queue.empty():
            return False
        with self.store.lock:
            if any(self._claimable(t) for t in self.store.in_state(TaskState.OPEN)):
                return False
        return not self.ingestor.pending()

    def run_until_idle(self, *, timeout: float | None = None) -> bool:
        """Block until idle twice in a row (a tick apart); False on timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        quiet = 0
        while not self.stopping.is_set():
            quiet = quiet + 1 if self.is_idle() else 0
            if quiet >= 3:
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(TICK_S)
        return False

    def stop_agent(self, task_id: str) -> None:
        running = self.running.get(task_id)
        if running is not None:
            running.cancel.set()

    def _evolution(self, action: str, request: dict[str, object]) -> Outcome:
        try:
            config = parse_evolution(self.config.raw.get("evolution"))
        except (ValueError, TypeError) as exc:
            return Outcome.refused(f"bernstein.yaml: {exc}")
        proposal_id = str(request.get("proposal_id") or "")
        reason = str(request.get("reason") or "")
        reviewer = str(request.get("requested_by") or "") or None
        if action == "approve":
            return evolution_apply.approve(self.paths, self.repo, proposal_id, reason, config,
                                           reviewer)
        if action == "reject":
            return evolution_apply.reject(self.paths, proposal_id, reason, reviewer)
        from console.engine.control import summarise_evolve

        return summarise_evolve(evolution_apply.evolve(self.paths, self.repo, config))

    def _from_inbox(self, request: dict[str, object],
                    reply: Callable[[Outcome], None]) -> Outcome | None:
        """Quick actions answer now; approve and evolve (sandbox tests) run in their own
        thread so dispatch never waits on them, and answer when done."""
        if request.get("action") not in ("approve", "evolve"):
            return self.handle(request)

        def work() -> None:
            with self._evolution_lock:
                reply(self.handle(request))

        threading.Thread(target=work, name="engine-evolution", daemon=True).start()
        return None

    def handle(self, request: dict[str, object]) -> Outcome:
        """One operator action, from the console, the CLI or the control inbox."""
        action = str(request.get("action"))
        task_id = str(request.get("task_id") or "")
        if action == "retry":
            outcome = operations.retry(self.store, task_id)
        elif action == "escalate":
            model = request.get("model")
            outcome = operations.escalate(self.store, task_id, str(model) if model else None,
                                          self.runner.chains.config.ladder)
        elif action == "cancel":
            reason = str(request.get("reason") or "cancelled by the operator")
            outcome = operations.cancel(self.store, task_id, reason, self.stop_agent)
        elif action in ("approve", "reject", "evolve"):
            outcome = self._evolution(action, request)
        elif action == "pause":
            self.paused = True
            outcome = Outcome.done("engine paused: running attempts finish, no new ones start")
        elif action == "resume":
            self.paused = False
            outcome = Outcome.done("engine resumed")
        else:
            outcome = Outcome.refused(f"unknown action '{action}'")
        self.events.emit("info" if outcome.ok else "warning", outcome.message,
                         task_id=task_id or None)
        self.wake.set()
        return outcome
