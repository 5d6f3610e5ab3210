"""What the watcher thread hands the UI with each batch: table rows, header
figures and the alerts worth a notification. Built under the State's lock,
off the event loop; the handlers only lay them out.
"""

from __future__ import annotations

import msgspec
from textual.notifications import SeverityLevel

from console.model import EngineStatus
from console.sdd.state import Delta, State
from console.tui.task_rows import TaskRow, row_of


class Header(msgspec.Struct, frozen=True):
    counts: dict[str, int]
    problems: int
    engine: EngineStatus | None
    cost_usd: float
    pending_proposals: int


class Alert(msgspec.Struct, frozen=True):
    severity: SeverityLevel  # information | warning | error
    text: str


def rows_for(state: State, delta: Delta) -> dict[str, TaskRow | None]:
    """The rows this delta changes; None for a task that is gone."""
    rows: dict[str, TaskRow | None] = {}
    touched = [i for i in sorted(delta.touched) if i not in delta.upserts]
    for task_id in [*delta.upserts, *touched]:  # the task log's order: new rows append in it
        row = row_of(state, task_id)
        if row is not None:
            rows[task_id] = row
    for task_id in delta.removed:
        rows[task_id] = None
    return rows


def header_of(state: State) -> Header:
    return Header(dict(state.state_counts()), state.problem_count, state.engine_status,
                  state.chain_cost, len(state.pending_proposals()))


class AlertWatch(msgspec.Struct):
    """Remembers what was already announced, so each alert is said once.

    The first load only fills the memory: history is not news.
    """

    violated: set[str] = msgspec.field(default_factory=set)
    blocked: dict[str, object] = msgspec.field(default_factory=dict)
    pending: set[str] = msgspec.field(default_factory=set)

    def scan(self, state: State, delta: Delta, *, announce: bool) -> list[Alert]:
        alerts: list[Alert] = []
        for task_id in sorted(delta.touched):
            event = state.sla_latest.get(task_id)
            task = state.tasks.get(task_id)
            title = f" ({task.title})" if task else ""
            if event and event.event == "sla:violated" and task_id not in self.violated:
                self.violated.add(task_id)
                alerts.append(Alert("error", f"✗ SLA violated: {event.entity_type or 'task'} "
                                             f"{task_id}{title}"))
            report = state.gate_reports.get(task_id)
            if report is not None and self.blocked.get(task_id) is not report:
                self.blocked[task_id] = report
                blocking = [r.name for r in report.results if r.blocked]
                if blocking:
                    gates = "gate" + ("s" if len(blocking) > 1 else "")
                    alerts.append(Alert("warning", f"✗ required {gates} {', '.join(blocking)} "
                                                   f"blocked task {task_id}{title}"))
        if "proposals" in delta.sections:
            pending = set(state.pending_proposals())
            for pid in sorted(pending - self.pending):
                proposal = state.proposals.get(pid)
                name = f": {proposal.title}" if proposal else ""
                alerts.append(Alert("information",
                                    f"! proposal {pid} awaits your approval{name} (P)"))
            self.pending = pending
        return alerts if announce else []
