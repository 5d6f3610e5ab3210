"""The engine: a tick thread that ingests, unblocks and dispatches, and N worker threads.
One engine runs a project at a time (`EngineLock`); on start it recovers from a crashed
predecessor (`recovery.recover`); `stop()` kills agents and puts their tasks back to open.
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
from console.engine import inbox, requests
from console.engine.attempt import AttemptRunner, Running, new_session
from console.engine.backlog import TicketCloser
from console.engine.cascade import Bandit, CascadeRouter, parse_cascade, with_adapter
from console.engine.chain import ChainKeeper
from console.engine.errors import EngineError, IllegalTransition
from console.engine.events import EventLog
from console.engine.evolution_apply import EvolutionConfig, parse_evolution
from console.engine.gates.base import tool_environ
from console.engine.gates.cache import GateCache
from console.engine.gates.pipeline import GatePipeline, load_gate_setup
from console.engine.gates.plugins import PluginError
from console.engine.gitops import GitRepo
from console.engine.ingest import Ingestor, reconcile_blocked, satisfied
from console.engine.janitor import Janitor
from console.engine.llm import LlmClient
from console.engine.lock import EngineLock
from console.engine.missions import MissionKeeper, mission_deadlines
from console.engine.orphans import PROJECT_MARKER, protect_environment
from console.engine.preflight import preflight
from console.engine.recovery import recover
from console.engine.reflection import Reflector
from console.engine.review import MultiJudgeReview, parse_review
from console.engine.sla import SlaMonitor, parse_sla
from console.engine.storage import WriteHealth, is_storage_error, resume_if_writable
from console.engine.store import TaskStore
from console.model import EngineEvent, EngineStatus, Task, TaskState
from console.sdd.confine import is_safe_id
from console.sdd.fields import brief
from console.sdd.fileio import append_jsonl, atomic_write_json, atomic_write_text
from console.sdd.gate_config import GateConfigError
from console.sdd.metric_codec import encode_engine_status
from console.sdd.missions import load_missions
from console.sdd.paths import Kind, SddPaths
from console.sdd.project_config import ProjectConfig, load_config
from console.sdd.skeleton import init_project
from console.sdd.tail import JsonlTail

TICK_S = 0.2


class Engine:
    def __init__(self, root: Path, *, workers: int | None = None,
                 config: ProjectConfig | None = None, fsync: bool = True, trusted: bool = False,
                 echo: Callable[[EngineEvent], None] | None = None,
                 on_write_problem: Callable[[str | None], None] | None = None) -> None:
        self.paths = SddPaths(root.resolve())
        self.trusted = trusted  # True: the caller vouches (a demo it just wrote)
        self.config = config if config is not None else load_config(self.paths.root)
        self.workers = max(1, workers or self.config.workers or 2)
        self.session = f"engine-{uuid.uuid4().hex[:8]}"
        self.writes = WriteHealth(on_write_problem)
        self.events = EventLog(self.paths, echo=echo, on_write_error=self.write_failed)
        self.close_ticket = TicketCloser(self.paths, self.events)  # said once when it cannot
        self._refused_ids: set[str] = set()  # tasks whose id or role cannot be run (said once)
        self.fsync = fsync
        self.lock = EngineLock(self.paths)
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.paused = False
        self.running: dict[str, Running] = {}
        self._dirty = True  # a task changed since the last reconcile
        self._evolve_due = False  # evolution.on_idle: propose once each time work runs out
        self.evolution = EvolutionConfig()
        self.evolution_lock = threading.Lock()  # one approve/evolve at a time
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._published: tuple[int, int, bool, bool] | None = None
        self.store: TaskStore
        self.repo: GitRepo

    # -- life cycle ------------------------------------------------------------

    def start(self, *, create: bool = True) -> None:
        """Take ownership and start the threads; raises OwnedElsewhere or EngineError."""
        preflight(self.paths.root, trusted=self.trusted)  # trust; no links in .sdd/
        if not self.paths.sdd.is_dir() and not create:
            raise EngineError(f"no .sdd/ in {self.paths.root}; the engine starts once "
                              "the project is initialised (bernstein-tui init)")
        self.repo = self.make_repo()  # before writing anything
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
            # its control key; requests waiting from before it started are refused
            self.inbox = inbox.EngineInbox(self.paths, self.events)
            recover(self.paths, self.store, self.repo, self.events, self.reopen)
            env = tool_environ({PROJECT_MARKER: str(self.paths.root)})  # test_passes
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
        self.publish_status()
        self._spawn(self._tick_loop, "engine-tick")
        self.events.info(f"engine started: {self.workers} worker(s), base branch "
                         f"'{self.repo.base}'")

    def make_repo(self) -> GitRepo:
        return GitRepo(self.paths.root, self.config.base_branch)

    def _llm_call(self, record: dict) -> None:
        append_jsonl(self.paths.sdd / "metrics" / "llm_calls.jsonl", [record], fsync=False)

    def _chains(self, llm: LlmClient) -> ChainKeeper:
        """The cascade (unless `cascade: {enabled: false}`), bandit and reflection memory."""
        raw = self.config.raw.get("cascade")
        try:  # each task's ladder: its adapter's, `auto` resolved
            cascade = with_adapter(parse_cascade(raw, self.config.raw.get("complexity")),
                                   self.config.agents, os.environ)
        except Exception as exc:  # any malformed value: one line naming the section
            raise EngineError(f"bernstein.yaml: cascade/complexity: {exc}") from None
        enabled = not (isinstance(raw, dict) and raw.get("enabled") is False)
        bandit = Bandit(self.paths.sdd / "routing" / "cascade_bandit.json", cascade)
        router = CascadeRouter(cascade, bandit) if enabled else None
        reflector = Reflector(self.paths, llm, on_note=lambda m: self.events.warning(m))
        reflector.remember([r for _, r in
                            JsonlTail(self.paths.of(Kind.REFLECTIONS)).read().records])
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
        # the tools run the agent's code (its tests): the one environment of project code
        # (not agents.env: the vendor CLIs' keys are the agents', never the tests')
        env = tool_environ({PROJECT_MARKER: str(self.paths.root)})
        return GatePipeline(setup, llm, cache=GateCache(caching / "gates",
                                                        setup.config.cache_max_entries),
                            state_dir=caching, env=env, project=self.paths.root,
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
        try:  # tasks claimed but never started go back to open too
            for task in self.store.snapshot():
                if task.state is TaskState.CLAIMED:
                    self.reopen(task, "engine stopped before the attempt started")
        except OSError as exc:  # a full disk: the next engine's recovery reopens them
            self.write_failed(exc, "the task log")
        self.inbox.close("the engine stopped before carrying this out; nothing was done")
        self.publish_status(running=False)
        self.events.info("engine stopped")
        self.lock.release()

    def _ignore_worktrees(self) -> None:
        ignore = self.paths.sdd / "worktrees" / ".gitignore"
        if not ignore.exists():
            atomic_write_text(ignore, "*\n")

    def reopen(self, task: Task, why: str) -> None:
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
            except OSError as exc:
                if not self.write_failed(exc, "the engine's files"):
                    self.events.error(f"engine tick failed: {exc}")
            except Exception as exc:  # the loop must survive anything one tick hits
                self.events.error(f"engine tick failed: {type(exc).__name__}: {exc}")
            self.wake.wait(TICK_S)
            self.wake.clear()

    def _changed(self, task: Task) -> None:
        self._dirty = True
        self._evolve_due = self.evolution.on_idle
        self.wake.set()
        self.close_ticket(task)

    def write_failed(self, exc: OSError, what: str) -> bool:
        """A write to .sdd/ failed: True (and said once) when it is the disk, not a bug."""
        if not is_storage_error(exc):
            return False
        if self.writes.failed(exc, what) and self.events.echo is not None:
            # the event log cannot be written either: the echo (run's output) says it
            self.events.echo(EngineEvent("error", self.writes.problem or "", time.time()))
        return True

    def tick(self) -> None:
        if self.writes.problem is not None and not resume_if_writable(self):
            return
        self.ingestor.ingest()
        if self._dirty:
            self._dirty = False
            self.missions.tick()  # holds first, so a held task is never reopened
            reconcile_blocked(self.store)
        self.inbox.drain(lambda request, reply: requests.from_inbox(self, request, reply))
        if self.sla.due():
            self.sla.check()
            self.sla.check_missions(mission_deadlines(self.missions))
            self.sla.notifier.flush()  # webhooks, bounded in time
        if not self.paused and not self.stopping.is_set():
            self._dispatch()
        self.publish_status()
        if self._evolve_due and self._idle_apart_from_evolution():
            self._evolve_due = False
            with self.evolution_lock:
                outcome = requests.evolution(self, "evolve", {})
            self.events.info(f"evolution (on idle): {outcome.message.splitlines()[0]}")

    def _claimable(self, task: Task) -> bool:
        if task.state is not TaskState.OPEN or task.id in self.running \
                or task.metadata.get("held_by") or self.missions.holder(task.id, task.title) \
                or task.id in self._refused_ids:
            return False
        if not (is_safe_id(task.id) and is_safe_id(task.role)):  # both become paths
            self._refused_ids.add(task.id)
            self.events.error(f"task {brief(task.id)} not run: its id or role "
                              f"{brief(task.role)} is not a safe id (letters, digits, '.', "
                              "'_', '-')", task_id=None)
            return False
        return all(satisfied(self.store, d) for d in task.depends_on)

    def _dispatch(self) -> None:
        free = self.workers - len(self.running)
        if free <= 0 or self.writes.problem is not None:
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
            except OSError as exc:
                if not self.write_failed(exc, f"the record of {task_id}"):
                    self._crashed(task_id, exc)
            except Exception as exc:
                self._crashed(task_id, exc)
            finally:
                self.running.pop(task_id, None)
                self.wake.set()

    def _crashed(self, task_id: str, exc: Exception) -> None:
        self.events.error(f"attempt for {task_id} crashed: {type(exc).__name__}: {exc}",
                          task_id=task_id)
        with contextlib.suppress(EngineError, OSError):
            self.store.transition(task_id, TaskState.FAILED,
                                  reason=f"engine error: {type(exc).__name__}: {exc}")

    # -- status and control ----------------------------------------------------

    def publish_status(self, *, running: bool = True, strict: bool = False) -> None:
        """runtime/engine_status.json, rewritten only when something in it changed;
        `strict`: written in any case, and a failed write raises (the probe for writes
        working again)."""
        now = (self.workers, len(self.running), self.paused, running)
        if now == self._published and not strict:
            return
        self._published = now
        status = EngineStatus(pid=os.getpid(), workers=self.workers, busy=len(self.running),
                              paused=self.paused, running=running, base=self.repo.base,
                              updated_at=time.time())
        try:
            atomic_write_json(self.paths.of(Kind.ENGINE_STATUS), encode_engine_status(status))
        except OSError as exc:
            if strict or is_storage_error(exc):
                self._published = None  # written again once writes work
            if strict:
                raise
            if self.write_failed(exc, "runtime/engine_status.json"):
                return
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
            if self.writes.problem is not None and not self.running:
                return False  # nothing can run until writes work: say so, do not hang
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

    def handle(self, request: dict[str, object]) -> Outcome:
        """One operator action, from the console, the CLI or the control inbox."""
        return requests.handle(self, request)
