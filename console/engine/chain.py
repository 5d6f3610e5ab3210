"""A task's chain of attempts: where the next one runs, and what a finished one means.

`plan` picks the model for the next attempt (the cascade's choice, or the one an
escalation left on the task). `settle` records a finished attempt in the task's
chain (visible while the chain runs), feeds the bandit and the reflection loop,
and decides: done, the same model again, the next tier (back to open, with the
reason), or give up at the top of the ladder (failed, with every attempt's
reason). A finished chain becomes one line of metrics/cascade_chains.jsonl.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from console.engine.autofix import simple_type_errors
from console.engine.cascade import (
    GATES,
    NOT_ESCALATED,
    CascadeConfig,
    CascadeRouter,
    Step,
    chain_record,
    complexity_tier,
    cost_usd,
    new_chain_id,
)
from console.engine.errors import IllegalTransition
from console.engine.events import EventLog
from console.engine.reflection import Reflector
from console.engine.roles import Role
from console.engine.router import route
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.fileio import append_jsonl
from console.sdd.metric_codec import (
    FinishedTask,
    encode_task_metric,
    metric_point_file,
    metric_points,
)
from console.sdd.paths import Kind, SddPaths


def retry_limit(task: Task, chain: list[dict[str, Any]]) -> str | None:
    """Why no further attempt may start: the ticket's `max_retries` is used up (None
    when the ticket set none, or retries are left). Attempts the operator stopped do
    not count."""
    raw = task.metadata.get("retry_limit")
    if raw is None or isinstance(raw, bool):
        return None
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        return None
    retries = sum(1 for a in chain if not a.get("interrupted")) - 1
    return f"the ticket's max_retries ({limit}) was reached" if retries >= limit else None


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """What the runner learnt from one attempt."""

    state: TaskState  # DONE, FAILED, OPEN (engine stopping) or CANCELLED
    message: str
    recorded: bool = False  # DONE already written with the merge
    trigger: str | None = None  # the escalation trigger when it failed
    gate: str = ""  # which check failed, for the reflection
    digest: str = ""
    files: tuple[str, ...] = ()
    lines: tuple[int, int] = (0, 0)  # added, deleted by its merge
    tokens: tuple[int, int] = (0, 0)
    kind: str = "agent"
    fix_on: str = ""  # a reviewer asked for changes: the branch whose work is to be fixed
    cost_usd: float | None = None  # the CLI's own figure (else the price table's)
    final_message: str = ""  # the agent's last word (a CLI's JSON mode)
    extra_attempts: tuple[dict[str, Any], ...] = field(default=())  # e.g. an autofix


class ChainKeeper:
    def __init__(self, paths: SddPaths, store: TaskStore, router: CascadeRouter | None,
                 config: CascadeConfig, reflector: Reflector, events: EventLog) -> None:
        self.paths = paths
        self.store = store
        self.router = router
        self.config = config
        self.reflector = reflector
        self.events = events

    def plan(self, task: Task, role: Role, adapter: str | None = None) -> Step:
        planned = task.metadata.get("next_model")
        if planned:
            return Step(str(planned), str(task.metadata.get("next_effort") or "high"),
                        str(task.metadata.get("next_reason") or "escalated"))
        if self.router is None:  # cascade off: seed 001's deterministic router
            chosen = route(task, role)
            return Step(chosen.model, chosen.effort, chosen.reason)
        return self.router.first(task, role.configured_model, adapter)

    def start_metadata(self, task: Task, step: Step, attempt: int) -> dict[str, Any]:
        """What the task carries while this attempt runs (the chain so far + this one)."""
        tier, why = complexity_tier(task, self.config)
        chain = list(task.metadata.get("chain") or [])
        chain_id = str(task.metadata.get("chain_id") or new_chain_id())
        if not chain:
            chain_id = new_chain_id()
        chain.append({"task_id": task.id, "chain_id": chain_id, "model": step.model,
                      "effort": step.effort, "attempt_number": attempt,
                      "started_at": time.time(), "cost_usd": 0.0, "latency_s": 0.0,
                      "tokens_used": 0, "success": None, "escalated": False,
                      "escalation_reason": None, "route_reason": step.reason,
                      "kind": str(task.metadata.get("next_kind") or "agent")})
        return {"chain_id": chain_id, "chain": chain, "tier": tier, "tier_reason": why,
                "last_model": step.model, "last_effort": step.effort,
                "route_reason": step.reason}

    def prompt_extra(self, task: Task) -> str:
        previous = [a for a in (task.metadata.get("chain") or [])[:-1]]
        section = self.reflector.prompt_section(task.id, previous)
        review = task.metadata.get("review_feedback")
        if review:
            section += f"\n\n# Reviewers' feedback on the previous attempt\n{review}"
        return section

    def settle(self, task_id: str, end: AttemptEnd) -> None:
        """Record the attempt and move the task on; the caller holds no lock."""
        with self.store.lock:
            task = self.store.get(task_id)
            chain = [dict(a) for a in (task.metadata.get("chain") or [])]
            if not chain:
                return
            current = chain[-1]
            current.update(
                latency_s=round(time.time() - float(current["started_at"]), 3),
                tokens_used=end.tokens[0] + end.tokens[1], tokens_in=end.tokens[0],
                tokens_out=end.tokens[1],
                cost_usd=round(end.cost_usd if end.cost_usd is not None else
                               cost_usd(current["model"], *end.tokens, self.config), 6),
                success=end.state is TaskState.DONE, files_changed=list(end.files),
                lines_changed=list(end.lines), digest=end.digest[:4000],
                **({"final_message": end.final_message} if end.final_message else {}))
            chain[-1:-1] = [dict(a, chain_id=current["chain_id"]) for a in end.extra_attempts]
            if end.state in (TaskState.OPEN, TaskState.CANCELLED) or (
                    task.state is not TaskState.IN_PROGRESS and not end.recorded):
                self._interrupted(task, chain, end)  # stopped, cancelled, or failed by SLA
                return
            if self.router is not None and end.trigger not in NOT_ESCALATED:
                self.router.bandit.record(task.role, current["model"],
                                          end.state is TaskState.DONE)
            if end.state is TaskState.DONE:
                self._done(task, chain, end)
                return
            self._failed(task, chain, current, end)

    def _interrupted(self, task: Task, chain: list[dict[str, Any]], end: AttemptEnd) -> None:
        chain[-1].update(success=False, interrupted=True,
                         escalation_reason=f"interrupted ({task.status}): {end.message}"[:500])
        if task.state in (TaskState.CANCELLED, TaskState.FAILED):
            self._write_chain(task, chain, False)  # ended from outside: the chain ends too
            return
        if end.state is TaskState.CANCELLED:
            return
        try:
            self.store.transition(task.id, TaskState.OPEN, assigned_agent=None,
                                  result_summary="engine stopped; will run again",
                                  metadata={"chain": chain})
        except IllegalTransition as exc:
            self.events.error(str(exc), task_id=task.id)

    def _done(self, task: Task, chain: list[dict[str, Any]], end: AttemptEnd) -> None:
        meta = {"chain": chain, "next_model": None, "next_effort": None, "next_reason": None,
                "review_feedback": None}
        if end.recorded:
            self.store.update(task.id, metadata=meta)
        else:
            self.store.transition(task.id, TaskState.DONE, reason=end.message, metadata=meta)
        self._write_chain(self.store.get(task.id), chain, True)
        self.events.info(f"{task.id} done on {chain[-1]['model']}: {end.message}",
                         task_id=task.id)

    def _failed(self, task: Task, chain: list[dict[str, Any]], current: dict[str, Any],
                end: AttemptEnd) -> None:
        trigger = end.trigger or "failure"
        if end.digest or end.gate:
            self.reflector.reflect(task_id=task.id, iteration=int(current["attempt_number"]),
                                   model=current["model"], gate=end.gate or trigger,
                                   digest=end.digest or end.message,
                                   files_changed=list(end.files))
        tier = str(task.metadata.get("tier") or "simple")
        # after a cheap autofix attempt the ladder resumes where the task was, not below it
        model = (str(task.metadata.get("resume_model") or current["model"])
                 if current.get("kind") == "autofix" else current["model"])
        on_model = sum(1 for a in chain if a["model"] == model and a.get("kind") != "autofix"
                       and not a.get("interrupted"))
        step = None
        autofixing = fixing = False
        operator = task.metadata.get("next_by_operator") and task.metadata.get("next_model")
        limit = retry_limit(task, chain)
        if operator:  # an escalate during the attempt wins over the cascade's own choice
            step = Step(str(operator), str(task.metadata.get("next_effort") or "high"),
                        str(task.metadata.get("next_reason") or "escalated by the operator"))
        elif limit is not None:
            pass  # the ticket's max_retries: no further attempt
        elif end.fix_on and current.get("kind") != "fix":
            step = Step(current["model"], str(current.get("effort") or "high"),
                        "fix attempt: the cross-model reviewer asked for changes; "
                        f"{current['model']} fixes its reviewed work")
            fixing = True
        elif (self.router is not None and trigger == GATES
                and simple_type_errors(end.gate, end.digest)
                and not any(a.get("kind") == "autofix" for a in chain)):
            cheapest = self.config.ladders.of(task)[0]
            step = Step(cheapest, "low", f"AutoFixer: only simple type errors; the cheapest "
                                         f"model ({cheapest}) fixes them first")
            autofixing = True
        elif self.router is not None and trigger not in NOT_ESCALATED:
            step = self.router.next(task, model, trigger, tier, on_model)
        current.update(escalated=step is not None and not autofixing
                       and step.model != current["model"] and current.get("kind") != "autofix",
                       escalation_reason=f"{trigger}: {end.message}"[:500])
        if step is None:
            reasons = "; ".join(f"#{a['attempt_number']} {a['model']}: "
                                f"{a.get('escalation_reason') or 'failed'}" for a in chain
                                if not a.get("success"))
            why = limit or ("the top of the ladder was reached" if trigger not in NOT_ESCALATED
                            else "no stronger model fixes this")
            message = f"gave up after {len(chain)} attempt(s) ({why}): {reasons}"
            if self.router is None or len(chain) == 1:
                message = end.message + (f" ({limit})" if limit else "")
            self.store.transition(task.id, TaskState.FAILED, reason=message[:2000],
                                  metadata={"chain": chain, "next_model": None})
            self._write_chain(self.store.get(task.id), chain, False)
            self.events.error(f"{task.id} failed: {end.message}", task_id=task.id)
            return
        review = end.digest if trigger == "review below threshold" or fixing else None
        self.store.transition(
            task.id, TaskState.OPEN, assigned_agent=None, retry_count=task.retry_count + 1,
            result_summary=f"{trigger} on {current['model']}; next attempt on {step.model}",
            metadata={"chain": chain, "next_model": step.model, "next_effort": step.effort,
                      "next_reason": step.reason, "review_feedback": review,
                      "next_kind": "autofix" if autofixing else "fix" if fixing else "agent",
                      "fix_base": end.fix_on if fixing else None,
                      "next_by_operator": None,
                      "resume_model": current["model"] if autofixing else None})
        verb = "escalating to" if step.model != current["model"] else "retrying on"
        self.events.warning(f"{task.id} {trigger} on {current['model']}: {end.message[:200]}; "
                            f"{verb} {step.model}", task_id=task.id)

    def _write_chain(self, task: Task, chain: list[dict[str, Any]], succeeded: bool) -> None:
        """The chain ends with the task: its cascade line, and the task's metrics line
        and metric points in Bernstein's formats (the one place an attempt chain ends)."""
        now = time.time()
        public = [{k: v for k, v in a.items()
                   if k not in ("digest", "files_changed", "lines_changed")} for a in chain]
        append_jsonl(self.paths.of(Kind.CHAINS),
                     [chain_record(task, public, succeeded, self.config, now)])
        spent = dict(task.metadata.get("spent") or {})  # over every chain the task ran
        for key, value in (("seconds", sum(float(a.get("latency_s") or 0) for a in chain)),
                           ("tokens_in", sum(int(a.get("tokens_in") or 0) for a in chain)),
                           ("tokens_out", sum(int(a.get("tokens_out") or 0) for a in chain)),
                           ("cost_usd", sum(float(a.get("cost_usd") or 0) for a in chain))):
            spent[key] = round(float(spent.get(key) or 0) + value, 6)
        finished = FinishedTask(
            task.id, task.role, task.tenant_id, task.status, str(chain[-1]["model"]),
            str(task.metadata.get("adapter") or "") or None, spent["seconds"],
            int(spent["tokens_in"]), int(spent["tokens_out"]), spent["cost_usd"],
            len(chain[-1].get("files_changed") or ()), now,
            *(chain[-1].get("lines_changed") or (0, 0)))
        append_jsonl(self.paths.of(Kind.TASK_METRICS), [encode_task_metric(finished)])
        for metric_type, point in metric_points(finished).items():
            append_jsonl(metric_point_file(self.paths.sdd, metric_type, now), [point],
                         fsync=False)
        self.store.update(task.id, metadata={"chain": [], "chain_id": None,
                                             "last_chain": public, "spent": spent})
