"""`State`: everything the console knows about one `.sdd/`, updated incrementally.

Each file kind has exactly one reader (its decoder below) and is the only
contributor to its part of the state, so a truncated or replaced file resets
just that part. Every `apply_*` returns a `Delta` saying what changed, keyed by
task id, so views update rows in place instead of redrawing.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console.model import (
    Approval,
    ArchiveRecord,
    Chain,
    Decision,
    EngineEvent,
    EngineStatus,
    Experiment,
    GateLine,
    GateReport,
    PhaseGateEvent,
    Problem,
    Proposal,
    Reflection,
    Review,
    SlaEvent,
    Task,
    TaskMetric,
    Ticket,
)
from console.sdd import evolution_codec, metric_codec, task_codec
from console.sdd.fields import RecordError, req_str, str_or
from console.sdd.paths import Kind
from console.sdd.tail import TailBatch
from console.sdd.tickets import TicketError

MAX_PROBLEMS_PER_FILE = 10_000
MAX_ENGINE_EVENTS = 500

DECODERS: Mapping[Kind, Callable[[Mapping[str, Any]], Any]] = {
    Kind.TASKS: task_codec.decode_task,
    Kind.ARCHIVE: task_codec.decode_archive,
    Kind.GATE_LINES: metric_codec.decode_gate_line,
    Kind.CHAINS: metric_codec.decode_chain,
    Kind.TASK_METRICS: metric_codec.decode_task_metric,
    Kind.REFLECTIONS: metric_codec.decode_reflection,
    Kind.REVIEWS: metric_codec.decode_review,
    Kind.SLA_EVENTS: metric_codec.decode_sla_event,
    Kind.PHASE_GATES: metric_codec.decode_phase_event,
    Kind.DEFERRED: evolution_codec.decode_proposal,
    Kind.DECISIONS: evolution_codec.decode_decision,
    Kind.EXPERIMENTS: evolution_codec.decode_experiment,
    Kind.ENGINE_EVENTS: metric_codec.decode_engine_event,
}

#: the section of the console each kind feeds (tasks go by key instead)
SECTIONS: Mapping[Kind, str] = {
    Kind.TASKS: "tasks", Kind.ARCHIVE: "archive", Kind.GATE_LINES: "gates",
    Kind.GATE_REPORT: "gates", Kind.CHAINS: "chains", Kind.TASK_METRICS: "metrics",
    Kind.REFLECTIONS: "reflections", Kind.REVIEWS: "reviews", Kind.SLA_EVENTS: "sla",
    Kind.PHASE_GATES: "phase_gates", Kind.DEFERRED: "proposals", Kind.DECISIONS: "proposals",
    Kind.EXPERIMENTS: "proposals", Kind.TICKET: "backlog", Kind.ENGINE_EVENTS: "engine",
}


#: gate runs kept per gate for the quality screen's sparkline
GATE_RECENT = 40


@dataclass(slots=True)
class GateStats:
    """Running totals for one gate over every line of quality_gates.jsonl."""

    runs: int = 0
    passed: int = 0
    skipped: int = 0  # skipped or bypassed: nothing was judged, so neither pass nor fail
    cached: int = 0
    total_ms: int = 0
    recent: deque[bool | None] = field(default_factory=lambda: deque(maxlen=GATE_RECENT))

    def add(self, line: GateLine) -> None:
        judged = line.status not in ("skipped", "bypassed")
        ok = line.status == "pass"
        self.runs += 1
        self.passed += ok
        self.skipped += not judged
        self.cached += line.cached
        self.total_ms += max(0, line.duration_ms)
        self.recent.append(ok if judged else None)


@dataclass(slots=True)
class Delta:
    """What one batch of file changes did to the state."""

    upserts: dict[str, Task] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    sections: set[str] = field(default_factory=set)
    #: tasks whose gates, SLA or chains changed without a new task record
    touched: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.removed or self.sections or self.touched)

    def merge(self, other: Delta) -> Delta:
        for task_id in other.removed:
            self.upserts.pop(task_id, None)
        self.removed -= other.upserts.keys()
        self.removed |= other.removed
        self.upserts.update(other.upserts)
        self.sections |= other.sections
        self.touched |= other.touched
        return self


class State:
    """The aggregate of every file kind; mutate only through `apply_*`."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self._state_counts: Counter[str] = Counter()
        self.archive: dict[str, ArchiveRecord] = {}
        self.archive_records = 0
        self.gate_counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.gate_latest: dict[str, dict[str, GateLine]] = defaultdict(dict)
        self.gate_reports: dict[str, GateReport] = {}
        self.gate_stats: dict[str, GateStats] = defaultdict(GateStats)
        self.chains: dict[str, Chain] = {}
        self.chain_cost = 0.0  # total_cost_usd over every chain, kept as lines arrive
        self.last_chain: dict[str, Chain] = {}  # task id → its latest chain
        self.task_metrics: dict[str, TaskMetric] = {}
        self.reflections: dict[str, list[Reflection]] = defaultdict(list)
        self.reflection_count = 0
        self.reviews: dict[str, list[Review]] = defaultdict(list)
        self.review_count = 0
        self.sla_latest: dict[str, SlaEvent] = {}
        self.phase_events: list[PhaseGateEvent] = []
        self.proposals: dict[str, Proposal] = {}
        self.decisions: dict[str, list[Decision]] = defaultdict(list)
        self.experiments: list[Experiment] = []
        self.tickets: dict[str, Ticket] = {}
        self.engine_status: EngineStatus | None = None
        self.approvals: dict[str, Approval] = {}  # a task server's pending approvals
        self.engine_events: deque[EngineEvent] = deque(maxlen=MAX_ENGINE_EVENTS)
        self.engine_event_levels: Counter[str] = Counter()
        self.engine_event_total = 0  # ever added, so a reader can ask for "the new ones"
        self._problems: dict[str, list[Problem]] = defaultdict(list)
        self._overflow: Counter[str] = Counter()
        self._file_errors: dict[str, Problem] = {}
        self._gate_report_files: dict[str, str] = {}  # display path → task id
        self._dir_files: dict[Kind, set[str]] = {Kind.GATE_REPORT: set(), Kind.TICKET: set()}

    # -- problems --------------------------------------------------------------

    @property
    def problems(self) -> list[Problem]:
        out = list(self._file_errors.values())
        for name, items in self._problems.items():
            out.extend(items)
            if self._overflow[name]:
                out.append(Problem(name, None, f"{self._overflow[name]} more problems not listed"))
        return out

    @property
    def problem_count(self) -> int:
        return (len(self._file_errors) + sum(len(v) for v in self._problems.values())
                + sum(self._overflow.values()))

    def _problem(self, problem: Problem) -> None:
        items = self._problems[problem.file]
        if len(items) < MAX_PROBLEMS_PER_FILE:
            items.append(problem)
        else:
            self._overflow[problem.file] += 1

    def _clear_problems(self, display: str) -> None:
        self._problems.pop(display, None)
        self._overflow.pop(display, None)

    def set_file_error(self, display: str, reason: str | None) -> Delta:
        """A whole file is unreadable right now (or readable again, reason None)."""
        delta = Delta()
        self._set_file_error(display, reason, delta)
        return delta

    def _set_file_error(self, display: str, reason: str | None, delta: Delta) -> None:
        had = self._file_errors.get(display)
        if reason is None:
            if had is not None:
                del self._file_errors[display]
                delta.sections.add("problems")
        elif had is None or had.reason != reason:
            self._file_errors[display] = Problem(display, None, reason)
            delta.sections.add("problems")

    # -- JSONL kinds -----------------------------------------------------------

    def apply_jsonl(self, kind: Kind, display: str, batch: TailBatch) -> Delta:
        delta = Delta()
        self._set_file_error(display, batch.file_error, delta)
        if batch.reset:
            self._reset(kind, delta)
            self._clear_problems(display)
            delta.sections.update({SECTIONS[kind], "problems"})
        decode = DECODERS[kind]
        for problem in batch.problems:
            self._problem(problem)
        if batch.problems:
            delta.sections.add("problems")
        for line, raw in batch.records:
            try:
                record = decode(raw)
            except RecordError as exc:
                self._problem(Problem(display, line, str(exc)))
                delta.sections.add("problems")
                continue
            except Exception as exc:  # a decoder bug must cost one record, not the rest
                self._problem(Problem(display, line,
                                      f"unreadable record: {type(exc).__name__}: {exc}"))
                delta.sections.add("problems")
                continue
            self._add(kind, record, display, line, delta)
        return delta

    def _reset(self, kind: Kind, delta: Delta) -> None:
        if kind is Kind.TASKS:
            delta.removed |= self.tasks.keys()
            delta.upserts.clear()
            self.tasks.clear()
            self._state_counts.clear()
        elif kind is Kind.ARCHIVE:
            self.archive.clear()
            self.archive_records = 0
        elif kind is Kind.GATE_LINES:
            delta.touched |= self.gate_latest.keys()
            self.gate_counts.clear()
            self.gate_latest.clear()
            self.gate_stats.clear()
        elif kind is Kind.CHAINS:
            delta.touched |= {chain.task_id for chain in self.chains.values()}
            self.chains.clear()
            self.last_chain.clear()
            self.chain_cost = 0.0
        elif kind is Kind.TASK_METRICS:
            self.task_metrics.clear()
        elif kind is Kind.REFLECTIONS:
            self.reflections.clear()
            self.reflection_count = 0
        elif kind is Kind.REVIEWS:
            self.reviews.clear()
            self.review_count = 0
        elif kind is Kind.SLA_EVENTS:
            delta.touched |= self.sla_latest.keys()
            self.sla_latest.clear()
        elif kind is Kind.PHASE_GATES:
            self.phase_events.clear()
        elif kind is Kind.DEFERRED:
            self.proposals.clear()
        elif kind is Kind.DECISIONS:
            self.decisions.clear()
        elif kind is Kind.EXPERIMENTS:
            self.experiments.clear()
        elif kind is Kind.ENGINE_EVENTS:
            self.engine_events.clear()
            self.engine_event_levels.clear()

    def _put_task(self, task: Task, display: str, line: int | None, delta: Delta) -> None:
        if task.state is None:
            self._problem(Problem(display, line,
                                  f"task {task.id}: unknown state '{task.status}' "
                                  "(kept as written)"))
            delta.sections.add("problems")
        self._drop_task(task.id)
        self._state_counts[task.status] += 1
        self.tasks[task.id] = task
        delta.upserts[task.id] = task
        delta.removed.discard(task.id)

    def _drop_task(self, task_id: str) -> bool:
        old = self.tasks.pop(task_id, None)
        if old is None:
            return False
        self._state_counts[old.status] -= 1
        if not self._state_counts[old.status]:
            del self._state_counts[old.status]
        return True

    def _add(self, kind: Kind, record: Any, display: str, line: int, delta: Delta) -> None:
        if kind is Kind.TASKS:
            self._put_task(record, display, line, delta)
            return
        delta.sections.add(SECTIONS[kind])
        if kind is Kind.ARCHIVE:
            self.archive[record.task_id] = record
            self.archive_records += 1
        elif kind is Kind.GATE_LINES:
            self.gate_counts[record.gate][record.status] += 1
            self.gate_latest[record.task_id][record.gate] = record
            self.gate_stats[record.gate].add(record)
            delta.touched.add(record.task_id)
        elif kind is Kind.CHAINS:
            old_chain = self.chains.get(record.chain_id)
            self.chain_cost -= old_chain.total_cost_usd if old_chain else 0.0
            self.chain_cost += record.total_cost_usd
            self.chains[record.chain_id] = record
            self.last_chain[record.task_id] = record
            delta.touched.add(record.task_id)
        elif kind is Kind.TASK_METRICS:
            self.task_metrics[record.task_id] = record
        elif kind is Kind.REFLECTIONS:
            self.reflections[record.task_id].append(record)
            self.reflection_count += 1
        elif kind is Kind.REVIEWS:
            self.reviews[record.task_id].append(record)
            self.review_count += 1
        elif kind is Kind.SLA_EVENTS:
            self.sla_latest[record.entity_id] = record
            delta.touched.add(record.entity_id)
        elif kind is Kind.PHASE_GATES:
            self.phase_events.append(record)
        elif kind is Kind.DEFERRED:
            self.proposals[record.proposal_id] = record
        elif kind is Kind.DECISIONS:
            self.decisions[record.proposal_id].append(record)
        elif kind is Kind.EXPERIMENTS:
            self.experiments.append(record)
        elif kind is Kind.ENGINE_EVENTS:
            self.engine_events.append(record)
            self.engine_event_levels[record.level] += 1
            self.engine_event_total += 1

    # -- task server snapshots ---------------------------------------------------

    def apply_server_tasks(self, display: str, records: list[Any], *,
                           complete: bool) -> Delta:
        """Task records as a task server returned them (its TaskResponse objects).

        `complete`: these are all the tasks there are, so every task not among
        them is removed, and `display`'s old problems are cleared. Only what
        differs from the state goes into the Delta, so a full re-sync after a
        stream gap costs the views nothing when nothing changed.
        """
        delta = Delta()
        if complete and display in self._problems:
            self._clear_problems(display)
            delta.sections.add("problems")
        seen: set[str] = set()
        for index, raw in enumerate(records, 1):
            try:
                if not isinstance(raw, dict):
                    raise RecordError(f"expected a task object, got {raw!r:.40}")
                task = task_codec.decode_task(raw)
            except RecordError as exc:
                self._problem(Problem(display, index, str(exc)))
                delta.sections.add("problems")
                if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                    seen.add(raw["id"])  # unreadable now is not gone: keep what we had
                continue
            seen.add(task.id)
            if self.tasks.get(task.id) != task:
                self._put_task(task, display, index, delta)
        if complete:
            for task_id in [t for t in self.tasks if t not in seen]:
                self._drop_task(task_id)
                delta.upserts.pop(task_id, None)
                delta.removed.add(task_id)
        return delta

    def remove_task(self, task_id: str) -> Delta:
        """The task server says this task no longer exists (for this tenant)."""
        delta = Delta()
        if self._drop_task(task_id):
            delta.removed.add(task_id)
        return delta

    def apply_server_archive(self, display: str, records: list[Any]) -> Delta:
        """The archive as a task server lists it (replaces what was there)."""
        delta = Delta(sections={"archive"})
        self.archive.clear()
        self.archive_records = 0
        self._clear_problems(display)
        for index, raw in enumerate(records, 1):
            try:
                if not isinstance(raw, dict):
                    raise RecordError(f"expected an archive record, got {raw!r:.40}")
                record = task_codec.decode_archive(raw)
            except RecordError as exc:
                self._problem(Problem(display, index, str(exc)))
                delta.sections.add("problems")
                continue
            self.archive[record.task_id] = record
            self.archive_records += 1
        return delta

    def apply_server_approvals(self, display: str, items: list[Any]) -> Delta:
        """A task server's pending approvals (replaces them); section "approvals"."""
        delta = Delta()
        found: dict[str, Approval] = {}
        for index, raw in enumerate(items, 1):
            try:
                if not isinstance(raw, dict):
                    raise RecordError(f"expected an approval object, got {raw!r:.40}")
                approval = Approval(
                    task_id=req_str(raw, "task_id"), title=str_or(raw, "task_title", ""),
                    session_id=str_or(raw, "session_id", ""),
                    mechanism=str_or(raw, "mechanism", "task_review"),
                    diff=str_or(raw, "diff", ""), test_summary=str_or(raw, "test_summary", ""),
                    prompt=str_or(raw, "prompt", ""), unblocks=str_or(raw, "unblocks", ""))
            except RecordError as exc:
                self._problem(Problem(display, index, str(exc)))
                delta.sections.add("problems")
                continue
            found[approval.task_id] = approval
        if found != self.approvals:
            self.approvals = found
            delta.sections.add("approvals")
        return delta

    # -- whole-file kinds ------------------------------------------------------

    def apply_gate_report(self, display: str, obj: dict[str, Any] | None,
                          problem: Problem | None) -> Delta:
        """A runtime/gates/<task>.json file was (re)read; obj None = gone or unreadable."""
        delta = Delta(sections={"gates"})
        self._track(Kind.GATE_REPORT, display, present=obj is not None or problem is not None)
        self._clear_problems(display)
        old = self._gate_report_files.pop(display, None)
        if old is not None:
            self.gate_reports.pop(old, None)
        if problem is not None:
            self._problem(problem)
            delta.sections.add("problems")
        if obj is not None:
            try:
                report = metric_codec.decode_gate_report(obj)
            except RecordError as exc:
                self._problem(Problem(display, None, str(exc)))
                delta.sections.add("problems")
            else:
                self.gate_reports[report.task_id] = report
                self._gate_report_files[display] = report.task_id
                delta.touched.add(report.task_id)
        if old is not None:
            delta.touched.add(old)
        return delta

    def apply_engine_status(self, display: str, obj: dict[str, Any] | None,
                            problem: Problem | None) -> Delta:
        """runtime/engine_status.json was (re)read; obj None = gone or unreadable."""
        before = self.engine_status
        had_problem = display in self._problems
        self._clear_problems(display)
        self.engine_status = None
        if problem is None and obj is not None:
            try:
                self.engine_status = metric_codec.decode_engine_status(obj)
            except RecordError as exc:
                problem = Problem(display, None, str(exc))
        if problem is not None:
            self._problem(problem)
        delta = Delta()
        if self.engine_status != before:
            delta.sections.add("engine_status")
        if had_problem or problem is not None:
            delta.sections.add("problems")
        return delta

    def apply_ticket(self, display: str, parsed: Ticket | TicketError | None) -> Delta:
        """A backlog/open ticket was (re)read; None = the file is gone."""
        delta = Delta(sections={"backlog"})
        self._track(Kind.TICKET, display, present=parsed is not None)
        had_problem = display in self._problems
        self._clear_problems(display)
        self.tickets.pop(display, None)
        if isinstance(parsed, TicketError):
            self._problem(Problem(display, None, parsed.reason))
            delta.sections.add("problems")
        elif parsed is not None:
            self.tickets[display] = parsed
        if had_problem:
            delta.sections.add("problems")
        return delta

    def _track(self, kind: Kind, display: str, *, present: bool) -> None:
        if present:
            self._dir_files[kind].add(display)
        else:
            self._dir_files[kind].discard(display)

    def files_of(self, kind: Kind) -> frozenset[str]:
        """The files of a directory kind (gate reports, tickets) read so far."""
        return frozenset(self._dir_files[kind])

    # -- derived views ---------------------------------------------------------

    def pending_proposals(self) -> list[str]:
        """Ids whose latest decision still awaits a human (Bernstein's review rule)."""
        pending = [pid for pid, items in self.decisions.items() if items[-1].awaits_human]
        known = set(self.decisions)
        # a deferred proposal with no decision line at all still awaits a human
        pending += [pid for pid in self.proposals if pid not in known]
        return sorted(pending)

    def engine_events_since(self, seen: int) -> list[EngineEvent]:
        """Events added after the first `seen` (as many as are still kept)."""
        new = self.engine_event_total - seen
        if new <= 0:
            return []
        return list(self.engine_events)[-min(new, len(self.engine_events)):]

    def state_counts(self) -> Counter[str]:
        """Tasks per status as written, kept incrementally (a copy)."""
        return Counter(self._state_counts)
