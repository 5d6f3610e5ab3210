"""One registry entry per JSONL file kind (`KINDS`): how its records are decoded, the
section of the console they feed, how one is added to the State and how the State
forgets them all (the file was truncated or replaced). Each kind is the only
contributor to its part of the State, so a reset touches nothing else.

Adding a JSONL kind with a detail tab (CONTRIBUTING.md walks through it): its record
type in console/records.py, its `Kind` (path) in sdd/paths.py, a decoder and a
`KindSpec` here — `per_task_list(kind)` keeps its records by task id in
`State.per_task[kind]`, and `detail=True` makes the task detail follow it — and its
tab in tui/widgets/task_detail.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec

from console.sdd import (
    evolution_codec,
    gate_frame,
    gate_lines,
    metric_codec,
    task_codec,
    typed_block,
)
from console.sdd.delta import Delta
from console.sdd.paths import Kind
from console.sdd.tail import Block

if TYPE_CHECKING:
    from console.sdd.state import State


class Section(StrEnum):
    """A part of the console a change concerns; a view names the ones it follows."""

    TASKS = "tasks"
    ARCHIVE = "archive"
    GATES = "gates"
    CHAINS = "chains"
    METRICS = "metrics"
    REFLECTIONS = "reflections"
    REVIEWS = "reviews"
    SLA = "sla"
    PHASE_GATES = "phase_gates"
    PROPOSALS = "proposals"
    BACKLOG = "backlog"
    ENGINE = "engine"
    ENGINE_STATUS = "engine_status"
    APPROVALS = "approvals"
    AGENTS = "agents"  # the running agents' live telemetry (sdd/agent_live.py)
    PROBLEMS = "problems"


Decoder = Callable[[Mapping[str, Any]], Any]
#: (state, record, display path, line, delta): put one decoded record into the State
Adder = Callable[["State", Any, str, int, Delta], None]
Resetter = Callable[["State", Delta], None]
#: (state, whole lines, delta) → True when the block went in at once (else line by line)
BlockAdder = Callable[["State", bytes, Delta], bool]
ManyAdder = Callable[["State", str, int, list[Any], Delta], None]  # display, first line


class FrameReader(msgspec.Struct, frozen=True):
    """A large kind's read of megabytes at once, as columns: `prepare` (a read's blocks,
    the longest line allowed → what they come to, or None) runs without the State or
    its lock; `apply` (state, that, delta → False to go block by block) under it."""

    prepare: Callable[[list[Block], int], Any]
    apply: Callable[[State, Any, Delta], bool]


class KindSpec(msgspec.Struct, frozen=True):
    decoder: Decoder
    section: Section
    add: Adder
    reset: Resetter
    detail: bool = False  # a task's detail shows it (follows its changes)
    add_block: BlockAdder | None = None  # a large kind's fast path
    frame: FrameReader | None = None  # a large kind's read of megabytes, as columns
    #: a large kind's blocks decoded straight into its record type (typed_block.py)
    typed: typed_block.TypedBlock | None = None
    #: such a block's records at once, as `add` would add them one by one
    add_many: ManyAdder | None = None


def per_task_list(kind: Kind) -> tuple[Adder, Resetter]:
    """add/reset for a kind whose records are listed per task (`record.task_id`)."""
    def add(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
        state.per_task.setdefault(kind, {}).setdefault(record.task_id, []).append(record)
        delta.touched.add(record.task_id)

    def reset(state: State, delta: Delta) -> None:
        delta.touched |= state.per_task.pop(kind, {}).keys()

    return add, reset


# -- each kind's add and reset ---------------------------------------------------------

def _add_task(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    if isinstance(record, task_codec.Replaced):  # (a later line of its block replaces it)
        state.check_task_state(record.id, record.status, display, line, delta)
        delta.upserts.setdefault(record.id, record.last)  # (its place, as line by line)
    else:
        state._put_task(record, display, line, delta)


def _reset_tasks(state: State, delta: Delta) -> None:
    delta.removed |= state.tasks.keys()
    delta.upserts.clear()
    state.tasks.clear()
    state._state_counts.clear()


def _add_archive(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    state.archive[record.task_id] = record
    state.archive_records += 1


def _reset_archive(state: State, delta: Delta) -> None:
    state.archive.clear()
    state.archive_records = 0


def _add_chain(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    chains = state.chains  # (a property: a checkpoint's are decoded at the first ask)
    old = chains.get(record.chain_id)
    state.chain_cost += record.total_cost_usd - (old.total_cost_usd if old else 0.0)
    chains[record.chain_id] = record
    state.last_chain[record.task_id] = record
    delta.touched.add(record.task_id)
    index = state.chains_by_task
    if index is not None:
        if old is not None and old.task_id != record.task_id:  # (an id written again
            index.get(old.task_id, {}).pop(record.chain_id, None)  # for another task)
            delta.touched.add(old.task_id)
        index.setdefault(record.task_id, {})[record.chain_id] = record


def _add_chains(state: State, display: str, first: int, records: list[Any],
                delta: Delta) -> None:
    """A typed block of chains (50,000 in the large project: 75 ms one by one, ~15 at
    once), each as _add_chain adds it, when none of their ids is known yet or there
    twice, and no index is kept (a load); else one by one."""
    chains = state.chains
    ids = list(map(attrgetter("chain_id"), records))
    if (state.chains_by_task is not None or len(set(ids)) != len(ids)
            or not chains.keys().isdisjoint(ids)):
        for line, record in enumerate(records, first):
            _add_chain(state, record, display, line, delta)
        return
    cost = state.chain_cost
    for each in map(attrgetter("total_cost_usd"), records):
        cost += each  # (in order, as one by one: a float sum depends on it)
    state.chain_cost = cost
    chains.update(zip(ids, records, strict=True))
    tasks = list(map(attrgetter("task_id"), records))
    state.last_chain.update(zip(tasks, records, strict=True))
    delta.touched.update(tasks)


def _reset_chains(state: State, delta: Delta) -> None:
    delta.touched |= {chain.task_id for chain in state.chains.values()}
    state.chains.clear()
    state.chains_by_task = None
    state.chains_lost = False  # (read from the file's start again)
    state.last_chain.clear()
    state.chain_cost = 0.0


def _add_metric(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    state.task_metrics[record.task_id] = record


def _add_reflection(state: State, record: Any, display: str, line: int,
                    delta: Delta) -> None:
    state.reflections[record.task_id].append(record)
    state.reflection_count += 1


def _reset_reflections(state: State, delta: Delta) -> None:
    state.reflections.clear()
    state.reflection_count = 0


def _add_review(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    state.reviews[record.task_id].append(record)
    state.review_count += 1


def _reset_reviews(state: State, delta: Delta) -> None:
    state.reviews.clear()
    state.review_count = 0


def _add_sla(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    state.sla_latest[record.entity_id] = record
    delta.touched.add(record.entity_id)


def _reset_sla(state: State, delta: Delta) -> None:
    delta.touched |= state.sla_latest.keys()
    state.sla_latest.clear()


def _add_event(state: State, record: Any, display: str, line: int, delta: Delta) -> None:
    state.engine_events.append(record)
    state.engine_event_levels[record.level] += 1
    state.engine_event_total += 1


def _reset_events(state: State, delta: Delta) -> None:
    state.engine_events.clear()
    state.engine_event_levels.clear()


KINDS: Mapping[Kind, KindSpec] = {
    Kind.TASKS: KindSpec(task_codec.decode_task, Section.TASKS, _add_task, _reset_tasks,
                         typed=typed_block.TASKS),
    Kind.ARCHIVE: KindSpec(task_codec.decode_archive, Section.ARCHIVE, _add_archive,
                           _reset_archive),
    Kind.GATE_LINES: KindSpec(metric_codec.decode_gate_line, Section.GATES,
                              gate_lines.add_line, gate_lines.reset, detail=True,
                              add_block=gate_lines.add_block,
                              frame=FrameReader(gate_frame.prepare, gate_frame.apply)),
    Kind.CHAINS: KindSpec(metric_codec.decode_chain, Section.CHAINS, _add_chain,
                          _reset_chains, detail=True, typed=typed_block.CHAINS,
                          add_many=_add_chains),
    Kind.TASK_METRICS: KindSpec(metric_codec.decode_task_metric, Section.METRICS,
                                _add_metric, lambda state, delta: state.task_metrics.clear()),
    Kind.REFLECTIONS: KindSpec(metric_codec.decode_reflection, Section.REFLECTIONS,
                               _add_reflection, _reset_reflections, detail=True,
                               typed=typed_block.REFLECTIONS),
    Kind.REVIEWS: KindSpec(metric_codec.decode_review, Section.REVIEWS, _add_review,
                           _reset_reviews, detail=True),
    Kind.SLA_EVENTS: KindSpec(metric_codec.decode_sla_event, Section.SLA, _add_sla,
                              _reset_sla),
    Kind.REVIEW_QUEUE: KindSpec(
        metric_codec.decode_review_flag, Section.REVIEWS,
        lambda state, record, display, line, delta: state.review_queue.append(record),
        lambda state, delta: state.review_queue.clear()),
    Kind.PHASE_GATES: KindSpec(
        metric_codec.decode_phase_event, Section.PHASE_GATES,
        lambda state, record, display, line, delta: state.phase_events.append(record),
        lambda state, delta: state.phase_events.clear()),
    Kind.DEFERRED: KindSpec(
        evolution_codec.decode_proposal, Section.PROPOSALS,
        lambda state, record, display, line, delta: state.proposals.__setitem__(
            record.proposal_id, record),
        lambda state, delta: state.proposals.clear()),
    Kind.DECISIONS: KindSpec(
        evolution_codec.decode_decision, Section.PROPOSALS,
        lambda state, record, display, line, delta: state.decisions[
            record.proposal_id].append(record),
        lambda state, delta: state.decisions.clear()),
    Kind.EXPERIMENTS: KindSpec(
        evolution_codec.decode_experiment, Section.PROPOSALS,
        lambda state, record, display, line, delta: state.experiments.append(record),
        lambda state, delta: state.experiments.clear()),
    Kind.ENGINE_EVENTS: KindSpec(metric_codec.decode_engine_event, Section.ENGINE, _add_event,
                                 _reset_events),
}

#: the sections a task's detail follows (its tabs show these kinds' records)
DETAIL_SECTIONS = frozenset(spec.section for spec in KINDS.values() if spec.detail)
