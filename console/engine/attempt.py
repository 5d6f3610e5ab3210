"""One attempt at one task: worktree → agent → commit → janitor → merge → done or failed.

Runs in a worker thread. Every state change goes through the store; whatever
happens, the worktree is removed and the agent's process group is dead before
it returns.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from console.engine.agents.adapters import AgentContext, build_command, choose_adapter
from console.engine.agents.process import run_agent, scrubbed_env
from console.engine.errors import AdapterError, EngineError, IllegalTransition
from console.engine.events import EventLog
from console.engine.gates.base import ToolMissing
from console.engine.gates.pipeline import GatePipeline
from console.engine.gitops import GitRepo
from console.engine.janitor import Janitor
from console.engine.orphans import PROJECT_MARKER, SESSION_MARKER, kill_session, proc_start_ticks
from console.engine.roles import Role, load_role, render_prompt
from console.engine.router import route
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.fileio import append_jsonl, atomic_write_json
from console.sdd.gate_records import write_gate_run
from console.sdd.paths import SddPaths
from console.sdd.project_config import DEFAULT_ENV_ALLOW, ProjectConfig

HEARTBEAT_S = 2.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an attempt ended; `recorded` when its state change is already written."""

    state: TaskState
    message: str
    recorded: bool = False


@dataclass(slots=True)
class Running:
    """What the engine knows about an attempt in flight."""

    task_id: str
    session: str
    cancel: threading.Event
    stopping: bool = False  # the engine is shutting down: reopen, do not fail


class AttemptRunner:
    def __init__(self, paths: SddPaths, store: TaskStore, repo: GitRepo, config: ProjectConfig,
                 janitor: Janitor, events: EventLog, engine_session: str,
                 gates: GatePipeline | None = None) -> None:
        self.gates = gates
        self.paths = paths
        self.store = store
        self.repo = repo
        self.config = config
        self.janitor = janitor
        self.events = events
        self.engine_session = engine_session

    # -- bookkeeping files -----------------------------------------------------

    def _pid_file(self, session: str) -> Path:
        return self.paths.sdd / "runtime" / "pids" / f"{session}.json"

    def _record_pid(self, session: str, task_id: str, pid: int) -> None:
        atomic_write_json(self._pid_file(session), {
            "pid": pid, "pgid": pid, "start_ticks": proc_start_ticks(pid), "task_id": task_id,
            "engine_pid": os.getpid(), "session": session})

    def _heartbeat(self, session: str, phase: str, message: str) -> None:
        atomic_write_json(self.paths.sdd / "runtime" / "heartbeats" / f"{session}.json", {
            "timestamp": time.time(), "files_changed": 0, "status": "working",
            "current_file": None, "phase": phase, "progress_pct": None, "message": message})

    def _clear_session_files(self, session: str) -> None:
        for path in (self._pid_file(session),
                     self.paths.sdd / "runtime" / "heartbeats" / f"{session}.json"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # -- the attempt -----------------------------------------------------------

    def run(self, running: Running) -> None:
        task = self.store.get(running.task_id)
        attempt = int(task.metadata.get("attempt", 0)) + 1
        session = running.session
        branch = f"bernstein/{task.id}-{attempt}"
        role = load_role(task.role, self.paths.root / self.config.roles_dir)
        chosen = route(task, role)
        worktree = self.paths.sdd / "worktrees" / session
        log_path = self.paths.sdd / "runtime" / f"{session}.log"
        try:
            task = self.store.transition(
                task.id, TaskState.IN_PROGRESS, assigned_agent=session,
                claimed_by_session=self.engine_session,
                metadata={"attempt": attempt, "session": session, "branch": branch,
                          "last_model": chosen.model, "last_effort": chosen.effort,
                          "route_reason": chosen.reason, "log": self.paths.display(log_path)})
        except IllegalTransition:
            return  # cancelled between claim and start
        beat = threading.Event()
        outcome = Outcome(TaskState.FAILED, "the attempt ended without a verdict")
        try:
            append_jsonl(self.paths.sdd / "metrics" / "routing_decisions.jsonl", [{
                "task_id": task.id,
                "adapter": task.extra.get("cli") or self.config.agents.default,
                "model": chosen.model, "effort": chosen.effort, "reasons": [chosen.reason],
                "attempt": attempt, "timestamp": time.time()}], fsync=False)
            self.repo.add_worktree(worktree, branch)
            threading.Thread(target=self._beat, args=(session, beat), daemon=True,
                             name=f"heartbeat-{session}").start()
            outcome = self._work(task, running, attempt, chosen.model, chosen.effort, role,
                                 worktree, log_path, branch)
        except EngineError as exc:
            outcome = Outcome(TaskState.FAILED, str(exc))
        except Exception as exc:  # whatever happens, the task gets a verdict and a cleanup
            outcome = Outcome(TaskState.FAILED, f"engine error: {type(exc).__name__}: {exc}")
        finally:
            beat.set()
            kill_session(session)  # anything the agent left behind, even detached
            self._finish(running, outcome)
            keep_branch = outcome.state is TaskState.FAILED  # for the operator to inspect
            self.repo.remove_worktree(worktree, None if keep_branch else branch)
            self._clear_session_files(session)

    def _beat(self, session: str, stop: threading.Event) -> None:
        while not stop.is_set():
            self._heartbeat(session, "agent", "running")
            stop.wait(HEARTBEAT_S)

    @staticmethod
    def _stopped(running: Running) -> Outcome:
        return Outcome(TaskState.OPEN if running.stopping else TaskState.CANCELLED,
                       "agent stopped")

    def _work(self, task: Task, running: Running, attempt: int, model: str, effort: str,
              role: Role, worktree: Path, log_path: Path, branch: str) -> Outcome:
        extra_env = {"BERNSTEIN_MODEL": model, "BERNSTEIN_TASK_ID": task.id,
                     "BERNSTEIN_ATTEMPT": str(attempt), PROJECT_MARKER: str(self.paths.root),
                     SESSION_MARKER: running.session}
        extra_env.update({k: os.environ[k] for k in self.config.agents.env if k in os.environ})
        env = scrubbed_env(DEFAULT_ENV_ALLOW, extra_env)
        ctx = AgentContext(task, render_prompt(role, task), model, effort, attempt, worktree, env)
        try:
            adapter = choose_adapter(task, self.config.agents, env)
            command = build_command(adapter, ctx, self.config.agents)
        except AdapterError as exc:
            return Outcome(TaskState.FAILED, str(exc))
        timeout = self.config.agents.timeouts.get(task.scope,
                                                  self.config.agents.timeouts["medium"])
        try:
            result = run_agent(command, worktree, timeout_s=timeout, log_path=log_path,
                               cap_bytes=self.config.agents.log_cap_bytes, cancel=running.cancel,
                               kill_grace_s=self.config.agents.kill_grace_s,
                               on_start=lambda pid: self._record_pid(running.session, task.id,
                                                                     pid))
        except OSError as exc:
            return Outcome(TaskState.FAILED,
                           f"adapter {adapter} could not start: {exc.strerror or exc}")
        if result.cancelled:
            return self._stopped(running)
        if result.timed_out:
            return Outcome(TaskState.FAILED, f"agent timed out after {timeout:.0f} s "
                                             f"(scope {task.scope}) and was killed")
        if result.exit_code != 0:
            last = (result.output_tail.strip().splitlines() or [""])[-1][:200]
            return Outcome(TaskState.FAILED,
                           f"agent exited with code {result.exit_code}: {last}")
        files = self.repo.commit_all(worktree, f"{task.title} ({task.id}, attempt {attempt})")
        checks = self.janitor.check(task.completion_signals, worktree, task_title=task.title,
                                    log_path=log_path, cancel=running.cancel,
                                    diff=self.repo.diff(worktree))
        if running.cancel.is_set():  # a killed check is no verdict on the work
            return self._stopped(running)
        failed = [c for c in checks if not c.passed]
        if failed:
            return Outcome(TaskState.FAILED, "janitor: " + "; ".join(str(c) for c in failed))
        if self.gates is not None:
            blocked = self._gates(task, worktree, running)
            if running.cancel.is_set():
                return self._stopped(running)
            if blocked is not None:
                return Outcome(TaskState.FAILED, blocked)
            files = self.repo.commit_all(worktree, f"auto_format ({task.id}, attempt {attempt})")
        with self.store.lock:  # a cancel cannot slip in between this check and the merge
            if running.cancel.is_set() or self.store.get(task.id).state is not \
                    TaskState.IN_PROGRESS:
                return self._stopped(running)
            if not files:
                message = "agent reported success; no files changed"
            else:
                merged = self.repo.merge(branch, self.repo.merge_message(branch, task.title))
                if not merged.ok:
                    return Outcome(TaskState.FAILED, merged.message)
                message = merged.message
            self.store.transition(task.id, TaskState.DONE, reason=message)
            return Outcome(TaskState.DONE, message, recorded=True)

    def _gates(self, task: Task, worktree: Path, running: Running) -> str | None:
        """Run the pipeline on the attempt's change; the reason it blocks, or None."""
        assert self.gates is not None
        try:
            run = self.gates.run(worktree, task_id=task.id, title=task.title,
                                 description=task.description,
                                 base_ref=self.gates.config.base_ref or self.repo.base,
                                 cancel=running.cancel)
        except ToolMissing as exc:
            return f"gates could not run: {exc}"
        write_gate_run(self.paths, run.report)
        for result in run.report.results:
            if result.required and result.status == "skipped" and \
                    not result.details.endswith("not met"):
                self.events.warning(f"{task.id}: required gate {result.name} did not run — "
                                    f"{result.details}", task_id=task.id)
        if not run.blocking:
            return None
        reasons = []
        for result in run.blocking:
            first = result.digest.splitlines()[1] if result.digest.count("\n") else ""
            reasons.append(f"{result.name} {result.status}: {first or result.details}")
        return "gates blocked — " + "; ".join(reasons)

    def _finish(self, running: Running, outcome: Outcome) -> None:
        state, message = outcome.state, outcome.message
        task_id = running.task_id
        with self.store.lock:
            current = self.store.get(task_id)
            if current.state is TaskState.CANCELLED or state is TaskState.CANCELLED:
                return  # the operator's cancel already said why
            try:
                if outcome.recorded:
                    pass  # written together with the merge
                elif state is TaskState.OPEN:
                    self.store.transition(task_id, TaskState.OPEN, assigned_agent=None,
                                          result_summary="engine stopped; will run again")
                else:
                    self.store.transition(task_id, state, reason=message)
            except IllegalTransition as exc:
                self.events.error(str(exc), task_id=task_id)
                return
        level = "info" if state is TaskState.DONE else "warning"
        self.events.emit(level, f"{task_id} {state.value}: {message}", task_id=task_id)


def new_session(role: str) -> str:
    return f"{role}-{uuid.uuid4().hex[:8]}"
