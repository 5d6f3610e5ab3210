"""What the task table shows for each task, and the filter and sort over the rows.

Pure functions of the State (no widgets, no I/O): the watcher thread builds rows
under the State's lock, the table only lays them out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import msgspec

from console.model import SUCCEEDED, TaskState, short_state_label
from console.sdd.sanitize import CELL_LIMIT, display_text
from console.sdd.state import State

STATE_RANK = {state.value: rank for rank, state in enumerate(TaskState)}
FAILING = frozenset({"fail", "timeout"})
FINISHED = frozenset({"done", "failed"})


class Column(msgspec.Struct, frozen=True):
    key: str
    label: str
    width: int  # 0: whatever is left


COLUMNS = (Column("state", "State", 14), Column("id", "ID", 13), Column("priority", "P", 3),
           Column("role", "Role", 9), Column("model", "Model", 7), Column("attempt", "Try", 5),
           Column("gates", "Gates", 8), Column("sla", "SLA", 11), Column("title", "Title", 0))
COLUMN_KEYS = tuple(c.key for c in COLUMNS)


class TaskRow(msgspec.Struct, frozen=True):
    id: str
    status: str
    title: str
    role: str
    priority: int
    model: str
    attempt: int  # 0: not started
    attempts: int
    gates_pass: int
    gates_fail: int
    deadline: float | None
    created_at: float | None
    sla: str  # "" | "warning" | "violated" | "met"
    terminal: bool  # finished: done, failed or terminal — its SLA is settled

    def remaining(self, now: float) -> float | None:
        return None if self.deadline is None else self.deadline - now

    def at_risk(self, now: float) -> bool:
        """Warned or late, and not finished: what the SLA strip and `sla:` show."""
        if self.deadline is None or self.terminal:
            return False
        return self.sla in ("warning", "violated") or self.deadline < now

    def cells(self, now: float) -> tuple[str, ...]:
        gates = ""
        if self.gates_pass or self.gates_fail:
            gates = f"✓{self.gates_pass}" + (f" ✗{self.gates_fail}" if self.gates_fail else "")
        attempt = f"{self.attempt}/{self.attempts}" if self.attempt else ""
        # the id and state are the row's keys, kept as they are; title, role and model
        # were made display text when the row was built
        return (display_text(short_state_label(self.status), limit=CELL_LIMIT),
                display_text(self.id, limit=CELL_LIMIT), f"P{self.priority}", self.role,
                self.model, attempt, gates, sla_cell(self, now), self.title)


def countdown(seconds: float) -> str:
    """`4m05s`, `1h02m`, `12s`: short enough for a column, exact to the second."""
    total = int(abs(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes \
        else f"{secs}s"
    return ("-" if seconds < 0 else "") + text


def sla_cell(row: TaskRow, now: float) -> str:
    """Glyph first, so the state is never carried by colour alone."""
    if row.deadline is None:
        return ""
    if row.terminal:
        if row.sla == "violated":
            return "✗ missed"
        if row.status not in SUCCEEDED and row.status != "failed":
            return ""  # cancelled, refused, abandoned: no work was due, no verdict
        return "✗ missed" if row.sla != "met" and row.deadline < now and \
            row.status not in SUCCEEDED else "✓ met"
    left = row.deadline - now
    if left < 0 or row.sla == "violated":
        return f"✗ {countdown(left)}"
    if row.sla == "warning":
        return f"⚠ {countdown(left)}"
    return f"◷ {countdown(left)}"


def row_of(state: State, task_id: str) -> TaskRow | None:
    """The row for one task; None when the State no longer has it."""
    task = state.tasks.get(task_id)
    if task is None:
        return None
    passed = failed = 0
    latest = state.latest_gates(task_id)
    if latest:
        for line in latest.values():
            failed += line.status in FAILING
            passed += line.status == "pass"
    elif (report := state.gate_reports.get(task_id)) is not None:
        for result in report.results:
            failed += result.status in FAILING
            passed += result.status == "pass"
    attempt = task.metadata.get("attempt")
    try:
        attempt_no = int(attempt) if attempt is not None else (
            task.retry_count + 1 if task.claimed_at else 0)
    except (TypeError, ValueError):
        attempt_no = 0
    sla = state.sla_latest.get(task_id)
    chain = task.metadata.get("chain")
    finished = state.last_chain.get(task_id)
    model = (finished.final_model if finished else None) or task.model or ""
    if isinstance(chain, list) and chain and isinstance(chain[-1], dict):
        model = str(chain[-1].get("model") or model)  # the attempt running now
    return TaskRow(
        id=task.id, status=task.status, title=display_text(task.title, limit=CELL_LIMIT),
        role=display_text(task.role, limit=CELL_LIMIT), priority=task.priority,
        model=display_text(model, limit=CELL_LIMIT), attempt=attempt_no,
        attempts=max(attempt_no, _max_attempts(task.metadata.get("max_attempts"),
                                               task.max_retries)),
        gates_pass=passed, gates_fail=failed, deadline=task.deadline, created_at=task.created_at,
        sla=sla.event.removeprefix("sla:") if sla else "",
        terminal=task.is_terminal or task.status in FINISHED)


def _max_attempts(value: object, max_retries: int) -> int:
    try:
        return int(value) if value is not None else max_retries + 1  # type: ignore[call-overload]  # JSON, caught
    except (TypeError, ValueError):
        return max_retries + 1


# -- filter --------------------------------------------------------------------

#: number keys → the quick filters (key, label, query)
QUICK_FILTERS = (
    ("0", "all", ""),
    ("1", "open", "state:open"),
    ("2", "running", "state:claimed,in_progress"),
    ("3", "failed", "state:failed"),
    ("4", "blocked", "state:blocked"),
    ("5", "done", "state:done,closed"),
    ("6", "cancelled", "state:cancelled"),
    ("7", "SLA at risk", "sla:risk"),
    ("8", "gate failing", "gates:fail"),
)

FILTER_KEYS = ("state", "role", "model", "id", "p", "sla", "gates")
_TERM = re.compile(r"(-?)(\w+):(\S*)|(\S+)")


class FilterError(ValueError):
    """A filter term that means nothing; its message names the term."""


Predicate = Callable[[TaskRow, float], bool]


def _has_word(needle: str, row: TaskRow, now: float) -> bool:
    return needle in row.id.lower() or needle in row.title.lower() or needle in row.role.lower()


def _negated(term: Predicate, row: TaskRow, now: float) -> bool:
    return not term(row, now)


def _key_term(key: str, value: str) -> Predicate:
    values = [v for v in value.lower().split(",") if v]
    if not values:
        raise FilterError(f"'{key}:' needs a value")
    if key == "state":
        return lambda row, now: any(row.status.startswith(v) for v in values)
    if key in ("role", "model", "id"):
        return lambda row, now: any(v in getattr(row, key).lower() for v in values)
    if key == "p":
        try:
            wanted = {int(v.removeprefix("p")) for v in values}
        except ValueError:
            raise FilterError(f"'p:{value}': a priority is a number (p:1, p:1,2)") from None
        return lambda row, now: row.priority in wanted
    if key == "sla":
        if not set(values) <= {"risk", "warning", "violated", "met", "any"}:
            raise FilterError(f"'sla:{value}': use sla:risk, sla:warning, sla:violated, "
                              "sla:met or sla:any")

        def sla(row: TaskRow, now: float) -> bool:
            return any((v == "risk" and row.at_risk(now)) or (v == "any" and row.deadline)
                       or row.sla == v or (v == "violated" and not row.terminal
                                           and row.deadline is not None and row.deadline < now)
                       for v in values)
        return sla
    if key == "gates":
        if not set(values) <= {"fail", "pass", "none"}:
            raise FilterError(f"'gates:{value}': use gates:fail, gates:pass or gates:none")
        return lambda row, now: any(
            (v == "fail" and row.gates_fail) or (v == "pass" and row.gates_pass
                                                 and not row.gates_fail)
            or (v == "none" and not row.gates_pass + row.gates_fail) for v in values)
    raise FilterError(f"unknown filter '{key}:' (use {', '.join(k + ':' for k in FILTER_KEYS)})")


def parse_filter(text: str) -> Predicate | None:
    """`state:failed role:qa parser -model:opus` → one predicate (all terms must hold).

    Bare words match the id, title or role (case-insensitive); `key:a,b` matches
    either value; a leading `-` negates a `key:` term. None for an empty filter.
    """
    predicates: list[Predicate] = []
    for match in _TERM.finditer(text):
        negate, key, value, word = match.groups()
        if word is not None:
            needle = word.lower()
            predicates.append(functools.partial(_has_word, needle))
            continue
        term = _key_term(key.lower(), value)
        predicates.append(functools.partial(_negated, term) if negate else term)
    if not predicates:
        return None
    return lambda row, now: all(p(row, now) for p in predicates)


# -- sort ----------------------------------------------------------------------

#: each column's sort key; ties keep the task log's order (the sort is stable)
SORT_KEYS: dict[str, Callable[[TaskRow], object]] = {
    "state": lambda r: STATE_RANK.get(r.status, len(STATE_RANK)),
    "id": lambda r: r.id,
    "priority": lambda r: r.priority,
    "role": lambda r: r.role,
    "model": lambda r: r.model,
    "attempt": lambda r: r.attempt,
    "gates": lambda r: (-r.gates_fail, -r.gates_pass),
    "sla": lambda r: (r.deadline is None or r.terminal, r.deadline or 0.0),
    "title": lambda r: r.title.lower(),
}
