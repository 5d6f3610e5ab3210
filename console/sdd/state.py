"""`State`: everything the console knows about one `.sdd/`, updated incrementally.

Each JSONL kind has one registry entry (`kinds.KINDS`: decoder, section, add, reset)
and is the only contributor to its part of the state, so a truncated or replaced file
resets just that part. Every `apply_*` returns a `Delta` saying what changed, keyed by
task id, so views update rows in place instead of redrawing. Problems live in
`problem_log`, a task server's snapshots in `server_state`.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from typing import Any

from console.model import (
    Approval,
    ArchiveRecord,
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
    ReviewFlag,
    SlaEvent,
    Task,
    TaskMetric,
    TaskState,
    Ticket,
)
from console.sdd import gate_frame, gate_lines, metric_codec, server_state
from console.sdd.agent_live import AgentLive
from console.sdd.chain_state import ChainState
from console.sdd.delta import Delta
from console.sdd.fields import RecordError
from console.sdd.gate_lines import GateStats, RawGateLine
from console.sdd.kinds import KINDS, Section
from console.sdd.paths import Kind
from console.sdd.tail import TailBatch, decode_block
from console.sdd.tickets import TicketError

__all__ = ["Delta", "GateStats", "Section", "State"]

MAX_ENGINE_EVENTS = 500

class State(ChainState):
    """The aggregate of every file kind; mutate only through `apply_*` (the chains'
    part: sdd/chain_state.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: dict[str, Task] = {}
        self._state_counts: Counter[str] = Counter()
        self.archive: dict[str, ArchiveRecord] = {}
        self.archive_records = 0
        self.gate_counts: dict[str, Counter[str]] = defaultdict(Counter)
        #: each task's latest line per gate, its gates in the order they first ran; read
        #: them through `latest_gates` (a line read in a block stays raw until then:
        #: sdd/gate_lines.py)
        self.gate_latest: dict[str, dict[str, GateLine | RawGateLine]] = {}
        #: latest lines still in frames (sdd/gate_frame.py), until gate_lines.flush
        self.gate_pending: list[Any] = []
        self.gate_pending_kept = 0  # rows the last cut of gate_pending kept
        self.gate_touched: set[str] = set()  # tasks whose latest lines frames made
        self.gate_ids: set[str] = set()  # task and gate ids gate_lines has checked
        self.gate_reports: dict[str, GateReport] = {}
        self.gate_stats: dict[str, GateStats] = defaultdict(GateStats)
        self.task_metrics: dict[str, TaskMetric] = {}
        self.reflections: dict[str, list[Reflection]] = defaultdict(list)
        self.reflection_count = 0
        self.reviews: dict[str, list[Review]] = defaultdict(list)
        self.review_count = 0
        self.sla_latest: dict[str, SlaEvent] = {}
        self.phase_events: list[PhaseGateEvent] = []
        self.review_queue: list[ReviewFlag] = []  # oldest first, as the file has them
        self.proposals: dict[str, Proposal] = {}
        self.decisions: dict[str, list[Decision]] = defaultdict(list)
        self.experiments: list[Experiment] = []
        self.tickets: dict[str, Ticket] = {}
        self.engine_status: EngineStatus | None = None
        self.approvals: dict[str, Approval] = {}  # a task server's pending approvals
        self.engine_events: deque[EngineEvent] = deque(maxlen=MAX_ENGINE_EVENTS)
        self.engine_event_levels: Counter[str] = Counter()
        self.engine_event_total = 0  # ever added, so a reader can ask for "the new ones"
        self._gate_report_files: dict[str, str] = {}  # display path → task id
        self._dir_files: dict[Kind, set[str]] = {Kind.GATE_REPORT: set(), Kind.TICKET: set()}
        #: records of kinds kept per task by `kinds.per_task_list` (kind → task id → records)
        self.per_task: dict[Kind, dict[str, list[Any]]] = {}
        #: the agents running now, with what they do and spend (sdd/agent_live.py)
        self.agents: tuple[AgentLive, ...] = ()
        self._agent_problems: list[Problem] = []  # the heartbeats' problems, as last read

    # -- JSONL kinds -----------------------------------------------------------

    def apply_jsonl(self, kind: Kind, display: str, batch: TailBatch,
                    prepared: Any = None) -> Delta:
        """A read of a JSONL kind (`prepared`: its `KindSpec.frame`'s prepare of it)."""
        spec = KINDS[kind]
        delta = Delta()
        self._set_file_error(display, batch.file_error, delta)
        if batch.reset:
            spec.reset(self, delta)
            self._clear_problems(display)
            delta.sections.update({spec.section, Section.PROBLEMS})
        for problem in batch.problems:
            self._problem(problem)
        if batch.problems:
            delta.sections.add(Section.PROBLEMS)
        self._add_records(kind, display, batch.records, delta)
        blocks = batch.blocks
        if (prepared is not None and spec.frame is not None  # megabytes at once, as columns
                and spec.frame.apply(self, prepared, delta)):
            delta.sections.add(spec.section)
            blocks = []
        for block in blocks:  # read(blocks=True): a hot kind's block at once
            whole = block.problem is None and len(block.data) <= batch.max_line_bytes
            if whole and spec.add_block is not None and spec.add_block(self, block.data,
                                                                       delta):
                delta.sections.add(spec.section)
                continue
            if (whole and spec.typed is not None
                    and (typed := spec.typed.decode(block.data, block.first,
                                                    block.lines)) is not None):
                self._add_typed(kind, display, block.first, typed, delta)
                continue
            records, problems = decode_block(block, display, batch.max_line_bytes)
            for problem in problems:
                self._problem(problem)
                delta.sections.add(Section.PROBLEMS)
            self._add_records(kind, display, records, delta)
        return delta

    def latest_gates(self, task_id: str) -> dict[str, GateLine]:
        """A task's latest quality_gates.jsonl line per gate (as of the last read that
        ended: gate_lines.latest)."""
        return gate_lines.latest(self, task_id)

    def gate_tasks(self) -> list[str]:
        """The tasks with quality_gates.jsonl lines, in the order their first came."""
        self.flush_gate_frames()
        return list(self.gate_latest)

    def flush_gate_frames(self) -> None:
        """The latest gate lines still in frames, into gate_latest (before it is read)."""
        if self.gate_pending:
            gate_frame.flush(self)

    def gate_frames_read(self) -> Delta:
        """At the end of a read of gate lines: their latest lines out of the frames, and
        the tasks whose latest lines frames made since the last call."""
        self.flush_gate_frames()
        touched, self.gate_touched = self.gate_touched, set()
        return Delta(touched=touched, sections={Section.GATES} if touched else set())

    def _add_records(self, kind: Kind, display: str, records: list[tuple[int, Any]],
                     delta: Delta) -> None:
        spec = KINDS[kind]
        for line, raw in records:
            try:
                record = spec.decoder(raw)
            except RecordError as exc:
                self._problem(Problem(display, line, str(exc)))
                delta.sections.add(Section.PROBLEMS)
                continue
            except Exception as exc:  # a decoder bug must cost one record, not the rest
                self._problem(Problem(display, line,
                                      f"unreadable record: {type(exc).__name__}: {exc}"))
                delta.sections.add(Section.PROBLEMS)
                continue
            if kind is not Kind.TASKS:  # tasks go by key (upserts), not by section
                delta.sections.add(spec.section)
            spec.add(self, record, display, line, delta)

    def _add_typed(self, kind: Kind, display: str, first: int, records: list[Any],
                   delta: Delta) -> None:
        """Records a typed block decoded (each one what the kind's decoder makes)."""
        spec = KINDS[kind]
        if records and kind is not Kind.TASKS:
            delta.sections.add(spec.section)
        if spec.add_many is not None:
            spec.add_many(self, display, first, records, delta)
            return
        add = spec.add
        for line, record in enumerate(records, first):
            add(self, record, display, line, delta)

    def restore_tasks(self, tasks: dict[str, Task]) -> None:
        """Tasks from a checkpoint, by id (their problems come back with the file's)."""
        for task_id in tasks.keys() & self.tasks.keys():
            self._drop_task(task_id)
        self._state_counts.update(task.status for task in tasks.values())
        self.tasks.update(tasks)

    def _put_task(self, task: Task, display: str, line: int | None, delta: Delta) -> None:
        self.check_task_state(task.id, task.status, display, line, delta)
        self._drop_task(task.id)
        self._state_counts[task.status] += 1
        self.tasks[task.id] = task
        delta.upserts[task.id] = task
        delta.removed.discard(task.id)

    def check_task_state(self, task_id: str, status: str, display: str, line: int | None,
                         delta: Delta) -> None:
        """A record's status no Bernstein version knows: its line's problem."""
        if TaskState.parse(status) is None:
            self._problem(Problem(display, line, f"task {task_id}: unknown state '{status}' "
                                                 "(kept as written)"))
            delta.sections.add(Section.PROBLEMS)

    def _drop_task(self, task_id: str) -> bool:
        old = self.tasks.pop(task_id, None)
        if old is None:
            return False
        self._state_counts[old.status] -= 1
        if not self._state_counts[old.status]:
            del self._state_counts[old.status]
        return True

    # -- task server snapshots ---------------------------------------------------

    def apply_server_tasks(self, display: str, records: list[Any], *,
                           complete: bool) -> Delta:
        """A task server's tasks (all of them when `complete`): server_state.py."""
        return server_state.server_tasks(self, display, records, complete=complete)

    def remove_task(self, task_id: str) -> Delta:
        return server_state.remove_task(self, task_id)

    def apply_server_archive(self, display: str, records: list[Any]) -> Delta:
        return server_state.server_archive(self, display, records)

    def apply_server_approvals(self, display: str, items: list[Any]) -> Delta:
        return server_state.server_approvals(self, display, items)

    # -- whole-file kinds ------------------------------------------------------

    def apply_gate_report(self, display: str, obj: dict[str, Any] | None,
                          problem: Problem | None) -> Delta:
        """A runtime/gates/<task>.json file was (re)read; obj None = gone or unreadable."""
        delta = Delta(sections={Section.GATES})
        self._track(Kind.GATE_REPORT, display, present=obj is not None or problem is not None)
        self._clear_problems(display)
        old = self._gate_report_files.pop(display, None)
        if old is not None:
            self.gate_reports.pop(old, None)
        if problem is not None:
            self._problem(problem)
            delta.sections.add(Section.PROBLEMS)
        if obj is not None:
            try:
                report = metric_codec.decode_gate_report(obj)
            except RecordError as exc:
                self._problem(Problem(display, None, str(exc)))
                delta.sections.add(Section.PROBLEMS)
            else:
                self.gate_reports[report.task_id] = report
                self._gate_report_files[display] = report.task_id
                delta.touched.add(report.task_id)
        if old is not None:
            delta.touched.add(old)
        return delta

    def restore_gate_report(self, display: str, report: GateReport) -> Delta:
        """A gate report from a checkpoint, its file unchanged since it was read (and
        listed for the first time: no report of that file is here yet)."""
        self._track(Kind.GATE_REPORT, display, present=True)
        self.gate_reports[report.task_id] = report
        self._gate_report_files[display] = report.task_id
        return Delta(touched={report.task_id}, sections={Section.GATES})

    def gate_report_files(self) -> dict[str, str]:
        """The gate report files read, and the task each one is the report of."""
        return dict(self._gate_report_files)

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
            delta.sections.add(Section.ENGINE_STATUS)
        if had_problem or problem is not None:
            delta.sections.add(Section.PROBLEMS)
        return delta

    def apply_agents(self, agents: list[AgentLive], problems: list[Problem]) -> Delta:
        """The running agents, read again (a local project's heartbeats, a server's
        agents): all of them, each bad heartbeat one problem."""
        delta = Delta()
        if tuple(agents) != self.agents:
            self.agents = tuple(agents)
            delta.sections.add(Section.AGENTS)
        if problems != self._agent_problems:  # (the same bad file is not news each read)
            for display in {p.file for p in self._agent_problems}:
                self._clear_problems(display)
            for problem in problems:
                self._problem(problem)
            self._agent_problems = list(problems)
            delta.sections.add(Section.PROBLEMS)
        return delta

    def apply_ticket(self, display: str, parsed: Ticket | TicketError | None) -> Delta:
        """A backlog/open ticket was (re)read; None = the file is gone."""
        delta = Delta(sections={Section.BACKLOG})
        self._track(Kind.TICKET, display, present=parsed is not None)
        had_problem = display in self._problems
        self._clear_problems(display)
        self.tickets.pop(display, None)
        if isinstance(parsed, TicketError):
            self._problem(Problem(display, None, parsed.reason))
            delta.sections.add(Section.PROBLEMS)
        elif parsed is not None:
            self.tickets[display] = parsed
        if had_problem:
            delta.sections.add(Section.PROBLEMS)
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
