"""One attempt at one task: worktree → agent → commit → janitor → gates (with the
AutoFixer) → review → low-confidence check → merge. What it ends in goes to the
ChainKeeper, which decides done, retry, escalate or give up.

Runs in a worker thread. Every state change goes through the store; whatever happens,
the worktree is removed and the agent's process group is dead before it returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from console.engine import autofix
from console.engine.agents.adapters import (
    AgentContext,
    build_command,
    check_model,
    choose_adapter,
    planned_adapter,
)
from console.engine.agents.clis import not_logged_in
from console.engine.agents.process import run_agent, scrubbed_env
from console.engine.agents.telemetry import AgentTelemetry
from console.engine.cascade import (
    FAILURE_FLAG,
    GATES,
    HARD_FAILURE,
    JANITOR,
    LOW_CONFIDENCE,
    REVIEW,
    REVIEW_UNAVAILABLE,
    Step,
    failure_flag,
    low_confidence,
    usage_from_output,
)
from console.engine.chain import AttemptEnd, ChainKeeper
from console.engine.errors import AdapterError, EngineError, IllegalTransition
from console.engine.events import EventLog
from console.engine.gates.base import ToolMissing
from console.engine.gates.pipeline import GatePipeline
from console.engine.gitops import GitRepo
from console.engine.janitor import Janitor
from console.engine.knowledge import knowledge_section
from console.engine.orphans import PROJECT_MARKER, SESSION_MARKER, kill_session, proc_start_ticks
from console.engine.review import MultiJudgeReview
from console.engine.review import feedback as review_feedback
from console.engine.roles import Role, RoleBook, render_prompt
from console.engine.safegit import child_env
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.agent_transcript import STRUCTURED, AgentReport, read_report
from console.sdd.fileio import append_jsonl, atomic_write_json
from console.sdd.gate_config import FIX
from console.sdd.gate_records import write_gate_run
from console.sdd.paths import Kind, SddPaths
from console.sdd.project_config import DEFAULT_ENV_ALLOW, ProjectConfig
from console.sdd.task_live import append_progress


@dataclass(slots=True)
class Running:
    """What the engine knows about an attempt in flight."""

    task_id: str
    session: str
    cancel: threading.Event
    stopping: bool = False  # the engine is shutting down: reopen, do not fail


class AttemptRunner:
    def __init__(self, paths: SddPaths, store: TaskStore, repo: GitRepo, config: ProjectConfig,
                 janitor: Janitor, events: EventLog, engine_session: str, chains: ChainKeeper,
                 gates: GatePipeline | None = None, review: MultiJudgeReview | None = None
                 ) -> None:
        self.gates = gates
        self.chains = chains
        self.review = review
        self.cascade_config = chains.config
        self.paths = paths
        self.store = store
        self.repo = repo
        self.config = config
        self.janitor = janitor
        self.events = events
        self.engine_session = engine_session
        self.roles = RoleBook(paths.root, config.roles_dir)  # as trusted, at the start
        self._live: dict[str, AgentTelemetry] = {}  # session -> its stage and telemetry
        self._reports: dict[str, AgentReport] = {}  # session -> what its CLI reported

    # -- bookkeeping files -----------------------------------------------------

    def _pid_file(self, session: str) -> Path:
        return self.paths.sdd / "runtime" / "pids" / f"{session}.json"

    def _record_pid(self, session: str, task_id: str, pid: int) -> None:
        atomic_write_json(self._pid_file(session), {
            "pid": pid, "pgid": pid, "start_ticks": proc_start_ticks(pid), "task_id": task_id,
            "engine_pid": os.getpid(), "session": session})
        self._live[session].started_pid(pid)

    def _stage(self, task_id: str, session: str, phase: str, message: str,
               percent: int) -> None:
        """Where the attempt is: a progress entry (Bernstein's `progress/<task>.jsonl`)
        and the phase the heartbeat reports from now on."""
        # advisory: a full disk or a hostile link shows in the store's own writes
        with contextlib.suppress(OSError, ValueError):
            self._live[session].stage(phase, message, percent)
            append_progress(self.paths.root, task_id, message, percent)

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
        role = self.roles.load(task.role)
        adapter = planned_adapter(task, self.config.agents, os.environ)
        step = self.chains.plan(task, role, adapter)  # on that adapter's own ladder
        worktree = self.paths.sdd / "worktrees" / session
        log_path = self.paths.sdd / "runtime" / f"{session}.log"
        try:
            task = self.store.transition(
                task.id, TaskState.IN_PROGRESS, assigned_agent=session,
                claimed_by_session=self.engine_session,
                metadata={"attempt": attempt, "session": session, "branch": branch,
                          "log": self.paths.display(log_path), "adapter": adapter,
                          **self.chains.start_metadata(task, step, attempt)})
        except IllegalTransition:
            return  # cancelled between claim and start
        beat = threading.Event()
        end = AttemptEnd(TaskState.FAILED, "the attempt ended without a verdict",
                         trigger=HARD_FAILURE)
        try:
            append_jsonl(self.paths.sdd / "metrics" / "routing_decisions.jsonl", [{
                "task_id": task.id, "adapter": adapter,
                "model": step.model, "effort": step.effort, "reasons": [step.reason],
                "attempt": attempt, "timestamp": time.time()}], fsync=False)
            # a fix attempt starts from the work the reviewer asked changes to
            fix_base = str(task.metadata.get("fix_base") or "") \
                if task.metadata.get("next_kind") == "fix" else ""
            self.repo.add_worktree(worktree, branch, start=fix_base or None)
            live = self._live[session] = AgentTelemetry(
                self.paths.root, session, task.id, task.role, step.model, self.cascade_config,
                self.paths.display(log_path), self.paths.display(worktree))
            self._stage(task.id, session, "agent",
                        f"attempt {attempt}: {adapter} on {step.model}", 10)
            threading.Thread(target=live.run_beats, args=(beat,), daemon=True,
                             name=f"heartbeat-{session}").start()
            end = self._work(task, running, attempt, step, role, worktree, log_path, branch)
            report = self._reports.pop(session, None)
            if report is not None:
                end = dataclasses.replace(end, cost_usd=report.cost_usd,
                                          final_message=report.final_message[:2000])
        except EngineError as exc:
            end = AttemptEnd(TaskState.FAILED, str(exc), trigger=HARD_FAILURE)
        except Exception as exc:  # whatever happens, the task gets a verdict and a cleanup
            end = AttemptEnd(TaskState.FAILED, f"engine error: {type(exc).__name__}: {exc}",
                             trigger=HARD_FAILURE)
        finally:
            beat.set()
            kill_session(session)  # anything the agent left behind, even detached
            if end.state is TaskState.OPEN and not running.stopping:
                end = AttemptEnd(TaskState.CANCELLED, end.message)
            try:
                self.chains.settle(task.id, end)
            except Exception as exc:
                self.events.error(f"{task.id}: recording the attempt failed: "
                                  f"{type(exc).__name__}: {exc}", task_id=task.id)
            keep_branch = end.state is TaskState.FAILED  # for the operator to inspect
            self.repo.remove_worktree(worktree, None if keep_branch else branch)
            live_end = self._live.pop(session, None)  # closed before its heartbeat goes:
            reached = live_end.close() if live_end is not None else 0  # no beat after it
            self._clear_session_files(session)
            with contextlib.suppress(OSError, ValueError):
                append_progress(self.paths.root, task.id,
                                f"attempt {attempt} {end.state.value}: {end.message}"[:500],
                                100 if end.state is TaskState.DONE else reached)

    @staticmethod
    def _stopped(running: Running) -> AttemptEnd:
        return AttemptEnd(TaskState.OPEN if running.stopping else TaskState.CANCELLED,
                          "agent stopped")

    def _work(self, task: Task, running: Running, attempt: int, step: Step, role: Role,
              worktree: Path, log_path: Path, branch: str) -> AttemptEnd:
        model, effort = step.model, step.effort
        extra_env = {"BERNSTEIN_MODEL": model, "BERNSTEIN_TASK_ID": task.id,
                     "BERNSTEIN_ATTEMPT": str(attempt), PROJECT_MARKER: str(self.paths.root),
                     SESSION_MARKER: running.session}
        extra_env.update({k: os.environ[k] for k in self.config.agents.env if k in os.environ})
        env = child_env(scrubbed_env(DEFAULT_ENV_ALLOW, extra_env), worktree)
        knowledge, problems = knowledge_section(self.paths.root)
        for problem in problems:
            self.events.warning(f"{task.id}: knowledge not read: {problem}", task_id=task.id)
        prompt = render_prompt(role, task, "\n\n".join(
            p for p in (knowledge, self.chains.prompt_extra(task)) if p))
        ctx = AgentContext(task, prompt, model, effort, attempt, worktree, env)
        try:
            adapter = choose_adapter(task, self.config.agents, env)
            check_model(adapter, model)
            command = build_command(adapter, ctx, self.config.agents)
            live = self._live[running.session]
            live.start(adapter)
            if adapter != task.metadata.get("adapter"):  # `auto` resolved: the metrics'
                self.store.update(task.id, metadata={"adapter": adapter})  # provider
        except AdapterError as exc:
            return AttemptEnd(TaskState.FAILED, str(exc), trigger="adapter")
        timeout = self.config.agents.timeouts.get(task.scope,
                                                  self.config.agents.timeouts["medium"])
        try:
            result = run_agent(command, worktree, timeout_s=timeout, log_path=log_path,
                               cap_bytes=self.config.agents.log_cap_bytes, cancel=running.cancel,
                               kill_grace_s=self.config.agents.kill_grace_s,
                               on_start=lambda pid: self._record_pid(running.session, task.id,
                                                                     pid), on_output=live.feed)
        except OSError as exc:
            return AttemptEnd(TaskState.FAILED,
                              f"adapter {adapter} could not start: {exc.strerror or exc}",
                              trigger="adapter")
        live.exited()
        report = read_report(adapter, log_path) if adapter in STRUCTURED else None
        # what the CLI said it used (its JSON mode), else our own BERNSTEIN_USAGE line
        tokens = (report.tokens_in, report.tokens_out) if report is not None and \
            report.events else usage_from_output(result.output_tail)
        if report is not None:  # its cost and last word go with the attempt's verdict
            self._reports[running.session] = report
        said = report.final_message if report is not None and report.final_message \
            else result.output_tail  # the agent's last word, for the checks below
        if result.cancelled:
            return self._stopped(running)
        if result.timed_out:
            return AttemptEnd(TaskState.FAILED, f"agent timed out after {timeout:.0f} s "
                                                f"(scope {task.scope}) and was killed",
                              trigger=HARD_FAILURE, tokens=tokens,
                              digest=result.output_tail[-2000:])
        cli_error = report.error if report is not None else ""
        if result.exit_code != 0 or cli_error:
            login = not_logged_in(adapter, f"{cli_error}\n{result.output_tail}") \
                if report is not None else None
            if login:  # no stronger model fixes missing credentials
                return AttemptEnd(TaskState.FAILED, login, trigger="adapter", tokens=tokens)
            last = cli_error or (result.output_tail.strip().splitlines() or [""])[-1]
            return AttemptEnd(TaskState.FAILED,
                              f"agent exited with code {result.exit_code}: {last[:200]}",
                              trigger=HARD_FAILURE, tokens=tokens, gate="agent",
                              digest=result.output_tail[-2000:])
        files = self.repo.commit_all(worktree, f"{task.title} ({task.id}, attempt {attempt})")
        self._stage(task.id, running.session, "janitor",
                    f"agent finished ({len(files)} file(s) changed); checking its work", 50)
        diff = self.repo.diff(worktree)
        checks = self.janitor.check(task.completion_signals, worktree, task_title=task.title,
                                    log_path=log_path, cancel=running.cancel, diff=diff)
        if running.cancel.is_set():  # a killed check is no verdict on the work
            return self._stopped(running)
        for check in (c for c in checks if c.flagged):  # the operator's review queue
            append_jsonl(self.paths.of(Kind.REVIEW_QUEUE), [{
                "timestamp": time.time(), "task_id": task.id, "attempt": attempt,
                "source": check.signal.type, "signal": check.signal.value,
                "detail": check.flagged}])
            self.events.warning(f"{task.id}: {check.signal.type} {check.flagged}",
                                task_id=task.id)
        failed = [c for c in checks if not c.passed]
        if failed:
            text = "; ".join(str(c) for c in failed)
            return AttemptEnd(TaskState.FAILED, f"janitor: {text}", trigger=JANITOR,
                              gate="janitor", digest=text, files=files, tokens=tokens)
        extra: tuple[dict, ...] = ()
        if self.gates is not None:
            self._stage(task.id, running.session, "gates", "quality gates running", 60)
            blocked = self._gates(task, worktree, running, files, branch)
            if running.cancel.is_set():
                return self._stopped(running)
            if isinstance(blocked, AttemptEnd):
                return dataclasses.replace(blocked, tokens=tokens)
            extra, reformatted = blocked
            if reformatted:  # only what auto_format changed; stray tool output stays out
                files = self.repo.commit_all(worktree,
                                             f"auto_format ({task.id}, attempt {attempt})")
        reviewed = self._review(task, diff, model)
        if running.cancel.is_set():
            return self._stopped(running)
        if reviewed is not None:
            return dataclasses.replace(reviewed, files=files, tokens=tokens, extra_attempts=extra)
        phrase = low_confidence(said, self.cascade_config.phrases)
        if phrase is not None:
            return AttemptEnd(TaskState.FAILED, f"the agent's output says {phrase!r}",
                              trigger=LOW_CONFIDENCE, files=files, tokens=tokens,
                              extra_attempts=extra)
        if failure_flag(said):
            return AttemptEnd(TaskState.FAILED, "the agent flagged its work as failed",
                              trigger=FAILURE_FLAG, files=files, tokens=tokens,
                              extra_attempts=extra)
        with self.store.lock:  # a cancel cannot slip in between this check and the merge
            if running.cancel.is_set() or self.store.get(task.id).state is not \
                    TaskState.IN_PROGRESS:
                return self._stopped(running)
            lines = (0, 0)
            if not files:
                message = "agent reported success; no files changed"
            else:
                self._stage(task.id, running.session, "merge", "merging into the base", 90)
                merged = self.repo.merge(branch, self.repo.merge_message(branch, task.title))
                if not merged.ok:
                    return AttemptEnd(TaskState.FAILED, merged.message, trigger="merge",
                                      files=files, tokens=tokens, extra_attempts=extra)
                message, lines = merged.message, merged.lines
            self.store.transition(task.id, TaskState.DONE, reason=message)
        return AttemptEnd(TaskState.DONE, message, recorded=True, files=files, tokens=tokens,
                          extra_attempts=extra, lines=lines)

    def _gates(self, task: Task, worktree: Path, running: Running, files: tuple[str, ...],
               branch: str) -> AttemptEnd | tuple[tuple[dict, ...], bool]:
        """Run the pipeline; an AttemptEnd when it blocks (after an AutoFixer try), else the
        autofix attempts it took and whether auto_format changed files."""
        assert self.gates is not None
        base_ref = self.gates.config.base_ref or self.repo.base
        writer = str(task.metadata.get("last_model") or "")  # the cross-model verifier's
        try:
            run = self.gates.run(worktree, task_id=task.id, title=task.title,
                                 description=task.description, base_ref=base_ref,
                                 cancel=running.cancel, writer_model=writer)
        except ToolMissing as exc:
            return AttemptEnd(TaskState.FAILED, f"gates could not run: {exc}", trigger="adapter")
        write_gate_run(self.paths, run.report)
        for result in run.report.results:
            if result.required and result.status == "skipped" and \
                    not result.details.endswith("not met"):
                self.events.warning(f"{task.id}: required gate {result.name} did not run — "
                                    f"{result.details}", task_id=task.id)
        if not run.blocking:
            return (), run.reformatted
        fixed = autofix.try_lint_fix(worktree, run.blocking, files)
        if fixed is not None:
            self.repo.commit_all(worktree, f"autofix: ruff --fix ({task.id})")
            again = self.gates.run(worktree, task_id=task.id, title=task.title,
                                   description=task.description, base_ref=base_ref,
                                   cancel=running.cancel, writer_model=writer)
            write_gate_run(self.paths, again.report)
            record = {**fixed, "task_id": task.id, "success": not again.blocking}
            if not again.blocking:
                self.events.info(f"{task.id}: AutoFixer fixed {fixed['fixed']} lint "
                                 "error(s) with ruff --fix", task_id=task.id)
                return (record,), again.reformatted
            run = again
            extra: tuple[dict, ...] = (record,)
        else:
            extra = ()
        reasons, digests = [], []
        for result in run.blocking:
            first = result.digest.splitlines()[1] if result.digest.count("\n") else ""
            reasons.append(f"{result.name} {result.status}: {first or result.details}")
            digests.append(f"[{result.name}] {result.digest or result.details}")
        # only the cross-model reviewer objects: the writer fixes the reviewed work
        settings = self.gates.config.option("cross_model", {})
        fix = [r.name for r in run.blocking] == ["cross_model"] and isinstance(
            settings, dict) and settings.get("on_request_changes", FIX) == FIX
        return AttemptEnd(TaskState.FAILED, "gates blocked — " + "; ".join(reasons),
                          trigger=GATES, gate=",".join(r.name for r in run.blocking),
                          digest="\n".join(digests), files=files, extra_attempts=extra,
                          fix_on=branch if fix else "")

    def _review(self, task: Task, diff: str, model: str) -> AttemptEnd | None:
        """Multi-judge review where the tier or the ticket asks for one."""
        tier = str(task.metadata.get("tier") or "")
        if self.review is None or not (tier in self.cascade_config.reviewed_tiers
                                       or task.metadata.get("require_review")):
            return None
        record = self.review.review(task_id=task.id, title=task.title,
                                    description=task.description, diff=diff,
                                    writer_model=model)
        append_jsonl(self.paths.of(Kind.REVIEWS), [record])
        if record.get("skipped") or record.get("passed"):
            if record.get("skipped"):
                self.events.info(f"{task.id}: {record['reason']}", task_id=task.id)
            return None
        if record.get("global_score") is None:  # no judge answered: no model can fix that
            return AttemptEnd(TaskState.FAILED, f"review: {record.get('reason')}",
                              trigger=REVIEW_UNAVAILABLE, gate="review")
        return AttemptEnd(TaskState.FAILED, f"review: {record.get('reason')}", trigger=REVIEW,
                          gate="review", digest=review_feedback(record))


def new_session(role: str) -> str:
    return f"{role}-{uuid.uuid4().hex[:8]}"
