"""A block of cascade_chains.jsonl decoded straight into Chain records, and one of
runtime/tasks.jsonl through the strict TaskWire (sdd/typed_block.py, the large-project
path), make the same State as reading them line by line through decode_chain and
decode_task: the same records, costs, state counts and latest chain per task, the same
problems on the same lines — whatever the lines hold and however the reads are cut."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.model import Task
from console.records import Chain
from console.sdd.paths import Kind
from console.sdd.state import State
from console.sdd.task_codec import (
    BERNSTEIN_LATER_KEYS,
    BERNSTEIN_TASK_KEYS,
    OUR_TASK_KEYS,
    TaskWire,
    decode_task,
)
from console.sdd.typed_block import CHAINS, REFLECTIONS, TASKS
from tests.tail_read import odd_lines, read_both

ODD = st.sampled_from
ATTEMPT = st.fixed_dictionaries({
    "model": ODD(["haiku", "sonnet", "opus", "gpt-6-luna"]),
    "attempt_number": st.integers(0, 5),
    "success": st.booleans(),
}, optional={
    "task_id": ODD(["T1"]), "chain_id": ODD(["c1"]),
    "effort": ODD(["low", "high", None, "très"]),
    "started_at": st.floats(0, 2e9) | st.integers(0, 2_000_000_000) | st.none(),
    "cost_usd": st.floats(0, 10) | st.integers(0, 3),
    "latency_s": st.floats(0, 100),
    "tokens_used": st.integers(0, 10**6),
    "escalated": st.booleans(),
    "escalation_reason": ODD(["janitor verification failed", None, "échec"]),
})
GOOD_CHAIN = st.fixed_dictionaries({
    "chain_id": ODD(["c1", "c2", "8647825d90056a87", "9z"]),
    "task_id": ODD(["T1", "T2", "b872fa4e30e4"]),
    "role": ODD(["backend", "qa", "", "rôle"]),
    "attempts": st.lists(ATTEMPT, max_size=3),
    "final_model": ODD(["sonnet", None]),
    "succeeded": st.booleans(),
}, optional={
    "total_cost_usd": st.floats(0, 10) | st.integers(0, 5),
    "first_attempt_cost_usd": st.floats(0, 10),
    "escalation_overhead_usd": st.floats(0, 10),
    "saved_vs_direct_opus_usd": st.floats(-5, 10),
    "timestamp": st.floats(1.7e9, 1.8e9) | st.integers(1_700_000_000, 1_800_000_000),
    "other": st.integers(),
})
#: odd values, most of which the strict shape refuses: each must read as line by line
ODD_VALUES: dict[str, list[Any]] = {
    "chain_id": ["", " c1", "ç1", 7, None, True, "-c", ["c1"]],
    "task_id": ["", " T1", "Tâche", 12, None],
    "role": [None, 5, True],
    "attempts": [None, [], ["x"], [{"model": ""}], [{"model": " opus", "attempt_number": 0,
                                                     "success": True}],
                 [{"model": "opus", "attempt_number": 1.0, "success": "true"}],
                 [{"model": "opus", "attempt_number": 0, "success": True,
                   "started_at": "2026-01-01T00:00:00Z"}],
                 [{"model": "opus", "attempt_number": 0, "success": True, "cost_usd": None}],
                 [{"model": "opus", "success": True}], "opus"],
    "final_model": [3, True, "", "é"],
    "succeeded": ["true", None, 1, "no"],
    "total_cost_usd": [None, "1.5", True, "x", 10**400, "nan"],
    "timestamp": ["2026-01-01T00:00:00Z", "1767225600", None, True, "garbage", 1e308],
}
JUNK = ODD([b"", b"  ", b"{not json", b"[1]", b"\xef\xbb\xbf{}", b'{"chain_id": "c1"} {}',
            b'"\\ud800"'])


#: mostly what Bernstein writes, now and then one odd value, a key missing, or not a
#: chain at all
CHAIN_LINE = odd_lines(GOOD_CHAIN, ODD_VALUES, JUNK, odd_one_in=21, drop_one_in=31)


def _seen(state: State) -> dict[str, Any]:
    return {"chains": list(state.chains.items()), "cost": state.chain_cost,
            "last": list(state.last_chain.items()),
            "problems": [(p.file, p.line, p.reason) for p in state.problems]}


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(CHAIN_LINE, max_size=30), step=st.integers(60, 4000))
def test_a_typed_block_is_line_by_line(tmp_path_factory, lines: list[bytes],
                                       step: int) -> None:
    (fast, fast_delta), (slow, slow_delta) = read_both(
        tmp_path_factory.mktemp("chains"), "cascade_chains.jsonl", lines, Kind.CHAINS, step)
    assert _seen(fast) == _seen(slow)
    assert (fast_delta.touched, fast_delta.sections) == (slow_delta.touched,
                                                          slow_delta.sections)


PLAIN = {"chain_id": "c1", "task_id": "T1", "role": "qa", "final_model": "opus",
         "succeeded": True, "total_cost_usd": 0.5, "timestamp": 1767225600.0,
         "attempts": [{"model": "opus", "attempt_number": 0, "success": True,
                       "cost_usd": 0.5, "tokens_used": 10}]}


@pytest.mark.parametrize(("key", "value"), [
    (key, value) for key, values in sorted(ODD_VALUES.items()) for value in values])
def test_each_odd_value_reads_as_line_by_line(tmp_path: Path, key: str, value: Any) -> None:
    (fast, _), (slow, _) = read_both(tmp_path, "cascade_chains.jsonl", [
        json.dumps(line).encode() for line in (
            {**PLAIN, "chain_id": "c0"}, {**PLAIN, key: value}, {**PLAIN, "chain_id": "c2"})],
        Kind.CHAINS)
    assert _seen(fast) == _seen(slow)


def test_what_bernstein_writes_decodes_straight_into_chains(tmp_path: Path) -> None:
    """The strict path is the one taken for Bernstein's lines (not a fallback that
    happens to agree): the block decodes whole, and its chains are Chain records."""
    rows = [{**PLAIN, "chain_id": f"c{i}", "task_id": f"T{i % 7}"} for i in range(500)]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    records = CHAINS.decode(data, 1)
    assert records is not None and len(records) == 500
    assert all(type(r) is Chain for r in records)
    assert records[3].attempts[0].tokens_used == 10 and records[3].timestamp == 1767225600.0
    assert CHAINS.decode(data.replace(b'"T3"', b'"  "', 1), 1) is None  # blank: refused
    assert CHAINS.decode(b"\n" + data, 1) is None  # a blank line: line by line
    assert CHAINS.decode(data, 1, 500) == records  # (the tail's count of its lines)
    assert CHAINS.decode(data, 1, 501) is None  # (one line the decoder did not see)


def test_a_block_of_new_chains_is_added_at_once_as_one_by_one(tmp_path: Path) -> None:
    """kinds._add_chains: the chains, their costs summed in the same order (a float sum
    depends on it), each task's latest chain, the touched tasks; then a block whose ids
    are known already, one by one."""
    rows = [{**PLAIN, "chain_id": f"c{i}", "task_id": f"T{i % 7}",
             "total_cost_usd": 0.1 * (i % 13) + 1e-9 * i} for i in range(500)]
    again = [{**PLAIN, "chain_id": f"c{i}", "task_id": "T9", "total_cost_usd": 3.3}
             for i in range(0, 500, 50)]
    first = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    assert CHAINS.decode(first, 1) is not None  # (the first read is one typed block)
    (fast, fast_delta), (slow, slow_delta) = read_both(
        tmp_path, "cascade_chains.jsonl", [json.dumps(r).encode() for r in rows + again],
        Kind.CHAINS, step=len(first))
    assert _seen(fast) == _seen(slow)
    assert fast_delta.touched == slow_delta.touched == {f"T{i}" for i in (*range(7), 9)}


# -- runtime/tasks.jsonl ---------------------------------------------------------------

BERNSTEIN_TASK = {  # a TaskRecord as Bernstein 1.9.3's writer puts it (reference §2.4)
    "id": "b872fa4e30e4", "title": "Search refactor", "description": "Synthetic task.",
    "role": "backend", "priority": 1, "scope": "medium", "complexity": "medium",
    "estimated_minutes": 30, "status": "open", "task_type": "standard",
    "upgrade_details": None, "depends_on": [], "parent_task_id": None,
    "depends_on_repo": None, "owned_files": ["src/m0.py"], "assigned_agent": None,
    "result_summary": None, "tenant_id": "default", "cell_id": None, "repo": None,
    "batch_eligible": False, "eu_ai_act_risk": "minimal", "approval_required": False,
    "risk_level": "low", "slack_context": None, "version": 1, "claimed_at": None,
    "completed_at": None, "closed_at": None, "claimed_by_session": None,
    "parent_session_id": None, "subtask_wait_started_at": None, "retry_count": 0,
    "max_retries": 3, "retry_delay_s": 0.0, "terminal_reason": None,
    "max_output_tokens": None, "meta_messages": [], "metadata": {},
    "created_at": 1767225600.0, "deadline": None, "model": "opus", "effort": None,
    "completion_signals": []}
#: as Bernstein 3.23.0's TaskStore._task_to_record writes it: two more keys, ours absent
BERNSTEIN_323_TASK = {
    **{k: v for k, v in BERNSTEIN_TASK.items() if k not in OUR_TASK_KEYS},
    "parent_context": None, "max_turns": None}
TASK_VALUES: dict[str, list[Any]] = {  # good ones first, then odd ones
    "id": ["T1", "T2", "tâche-3", "", " ", 7, None],
    "title": ["Fix it", "Über", " lead", "", "\t", 3],
    "status": ["open", "in_progress", "done", "failed", "blocked_by_failed_dep", "weird",
               "", 1],
    "description": ["", "d", None, 5, ["x"]],
    "priority": [0, 3, None, 2.0, "1", True, 10**30],
    "depends_on": [["T1"], [], None, "T1", [1], [None]],
    "owned_files": [["a.py", "b.py"], None, [True]],
    "version": [1, 7, None, "2"],
    "created_at": [1767225600, 1767225600.5, None, "2026-01-01T00:00:00Z", True, 1e308],
    "claimed_at": [None, 1767225601.0, "x"],
    "metadata": [{}, {"deadline": 1767229200}, {"deadline": "2026-01-01T01:00:00Z"},
                 {"deadline": "soon"}, {"adapter": "codex"}, None, [], "m"],
    "deadline": [None, 1767229200.0, "2026-01-01T02:00:00+00:00"],
    "completion_signals": [[], None, [{"type": "path_exists", "value": "a.py"}],
                           [{"type": "test_passes", "command": "pytest -q"}],
                           [{"type": "nope"}], ["x"], {}],
    "retry_count": [0, 2, -1, None, "1"],
    "model": ["sonnet", None, 3],
    "tenant_id": ["default", "acme", None],
    "upgrade_details": [None, {"x": 1}, "anything"],
    "a_key_of_no_ones": [1, "x", None],
    "parent_context": [None, "the parent's summary", {"files": ["a.py"]}],
    "max_turns": [None, 12, "many"],
}


@st.composite
def task_line(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 40)) == 0:
        return draw(JUNK)
    line = dict(draw(st.sampled_from([BERNSTEIN_TASK, BERNSTEIN_323_TASK])),
                id=draw(ODD(["T1", "T2", "T3"])))
    for key in draw(st.lists(ODD(sorted(TASK_VALUES)), max_size=3)):
        values = TASK_VALUES[key]
        line[key] = draw(ODD(values[:3] if draw(st.integers(0, 6)) else values))
    if draw(st.integers(0, 25)) == 0:
        line.pop(draw(ODD(sorted(line))))
    return json.dumps(line, ensure_ascii=draw(st.booleans())).encode()


def _tasks_seen(state: State) -> dict[str, Any]:
    return {"tasks": list(state.tasks.items()), "counts": sorted(state.state_counts().items()),
            "problems": [(p.file, p.line, p.reason) for p in state.problems]}


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(task_line(), max_size=25), step=st.integers(200, 20_000))
def test_a_typed_task_block_is_line_by_line(tmp_path_factory, lines: list[bytes],
                                            step: int) -> None:
    (fast, fast_delta), (slow, slow_delta) = read_both(
        tmp_path_factory.mktemp("tasks"), "tasks.jsonl", lines, Kind.TASKS, step)
    assert _tasks_seen(fast) == _tasks_seen(slow)
    assert (list(fast_delta.upserts.items()), fast_delta.removed, fast_delta.sections) == (
        list(slow_delta.upserts.items()), slow_delta.removed, slow_delta.sections)  # (in
    # order: the console adds rows as their tasks first come)


@pytest.mark.parametrize(("key", "value"), [
    (key, value) for key, values in sorted(TASK_VALUES.items()) for value in values])
def test_each_task_value_reads_as_line_by_line(tmp_path: Path, key: str, value: Any) -> None:
    (fast, _), (slow, _) = read_both(tmp_path, "tasks.jsonl", [
        json.dumps(line).encode() for line in (
            dict(BERNSTEIN_TASK, id="T0"), {**BERNSTEIN_TASK, key: value},
            dict(BERNSTEIN_TASK, id="T9", status="done"))], Kind.TASKS)
    assert _tasks_seen(fast) == _tasks_seen(slow)


def test_bernsteins_task_records_decode_through_the_wire(tmp_path: Path) -> None:
    """The strict path is taken for Bernstein's records, and a record with a key of no
    one's (kept in Task.extra by decode_task) is not."""
    rows = [dict(BERNSTEIN_TASK, id=f"T{i}", depends_on=[f"T{i - 1}"] if i else [])
            for i in range(300)]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    tasks = TASKS.decode(data, 1)
    assert tasks is not None and all(type(t) is Task for t in tasks)
    assert (tasks[5].depends_on, tasks[5].owned_files, tasks[5].extra) == (
        ("T4",), ("src/m0.py",), {})
    assert TASKS.decode(data.replace(b'"repo": null', b'"repo": null, "x": 1', 1), 1) is None
    later = [dict(BERNSTEIN_323_TASK, id="T1"),
             dict(BERNSTEIN_323_TASK, id="T2", parent_context="from T1", max_turns=8)]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in later)
    tasks = TASKS.decode(data, 1)  # (3.23.0's two more keys: kept in extra, as decode_task)
    assert tasks is not None and [t.extra for t in tasks] == [
        {"parent_context": None, "max_turns": None},
        {"parent_context": "from T1", "max_turns": 8}]
    assert tasks == [decode_task(r) for r in later]


@pytest.mark.parametrize(("odd", "typed"), [
    ({"status": "weird"}, True), ({"title": " "}, False),
    ({"metadata": {"deadline": "soon"}}, False), ({"metadata": {"deadline": 1.5}}, True),
    ({"completion_signals": [{"type": "nope"}]}, False), ({"priority": "1"}, False),
    ({"completion_signals": [{"type": "path_exists", "value": "a.py"}]}, True)])
def test_a_task_line_a_later_one_replaces_is_checked_not_made(
        tmp_path: Path, odd: dict[str, Any], typed: bool) -> None:
    """The task log holds every change of a task: in a block, only each task's last
    line becomes a Task; an earlier one still says its problems, as line by line."""
    lines = [dict(BERNSTEIN_TASK, id="T1", **odd), dict(BERNSTEIN_TASK, id="T2"),
             dict(BERNSTEIN_TASK, id="T1", status="done")]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    records = TASKS.decode(data, 1)  # (None: line by line, for a problem of its own)
    assert (records is not None) == typed
    if records is not None:
        assert [type(r).__name__ for r in records] == ["Replaced", "Task", "Task"]
    (fast, fast_delta), (slow, slow_delta) = read_both(tmp_path, "tasks.jsonl", [
        json.dumps(line).encode() for line in lines], Kind.TASKS)
    assert _tasks_seen(fast) == _tasks_seen(slow)
    assert list(fast_delta.upserts.items()) == list(slow_delta.upserts.items())
    if typed:  # (rows in the order their tasks came, as line by line)
        assert list(fast_delta.upserts) == ["T1", "T2"]


def test_the_wire_knows_every_task_key_and_no_other() -> None:
    """TaskWire forbids unknown keys: it must name exactly the keys of Bernstein's
    writers and ours (task_codec's lists), or lines with a key it misses would all go
    line by line, and a key it invents would be taken without decode_task's checks."""
    wire = {field.name for field in msgspec.structs.fields(TaskWire)}
    assert wire == set(BERNSTEIN_TASK_KEYS) | set(OUR_TASK_KEYS) | set(BERNSTEIN_LATER_KEYS)


REFLECTION = st.fixed_dictionaries({"task_id": ODD(["T1", "T2", "b872fa4e30e4"])}, optional={
    "iteration": st.integers(0, 5) | st.none(),
    "gate": ODD(["lint", "tests", "", None, "lïnt"]),
    "error_pattern": ODD(["lint:E0", "", None]),
    "diagnosis": st.fixed_dictionaries({}, optional={
        "what_failed": ODD(["lint reported an error", None, "échec"]),
        "why": ODD(["the change broke an assumption", ""]),
        "try_next": ODD(["fix the call site"]), "focus": ODD(["src/", None]),
    }) | st.none(),
    "source": ODD(["llm", "rules", None]),
    "model": ODD(["opus", "", None]),
    "digest": ODD(["lint failed: 1 error", None]),
    "files_changed": st.lists(ODD(["src/m0.py", "tests/t.py", "é.py"]), max_size=3) | st.none(),
    "reused": st.booleans() | st.none(),
    "timestamp": st.floats(1.7e9, 1.8e9) | st.integers(1_700_000_000, 1_800_000_000)
    | st.none(),
    "other": st.integers(),
})
REFLECTION_ODD: dict[str, list[Any]] = {
    "task_id": ["", " ", 7, None, True, ["T1"]],
    "iteration": [2.0, 2.5, "3", True, -1, 10**30],
    "gate": [5, True, ["lint"]],
    "diagnosis": ["x", [], {"why": 5}, {"other": "x"}, {"why": None}],
    "source": ["", "LLM", "human", 1],
    "model": [5, True],
    "files_changed": ["src/a.py", [1], [None], [True], {"a": 1}],
    "reused": ["true", "no", 1, 0],
    "timestamp": ["2026-01-01T00:00:00Z", "1767225600", True, "garbage", 1e308, 10**400],
}


#: mostly what the engine and Bernstein write, now and then an odd value or junk
REFLECTION_LINE = odd_lines(REFLECTION, REFLECTION_ODD, JUNK, odd_one_in=16)


def _reflections_seen(state: State) -> dict[str, Any]:
    return {"reflections": {t: list(r) for t, r in state.reflections.items()},
            "count": state.reflection_count,
            "problems": [(p.file, p.line, p.reason) for p in state.problems]}


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(REFLECTION_LINE, max_size=30), step=st.integers(60, 4000))
def test_typed_reflections_are_line_by_line(tmp_path_factory, lines: list[bytes],
                                            step: int) -> None:
    (fast, fast_delta), (slow, slow_delta) = read_both(
        tmp_path_factory.mktemp("refl"), "reflections.jsonl", lines, Kind.REFLECTIONS, step)
    assert _reflections_seen(fast) == _reflections_seen(slow)
    assert fast_delta.touched == slow_delta.touched


@pytest.mark.parametrize(("key", "value"), [
    (key, value) for key, values in sorted(REFLECTION_ODD.items()) for value in values])
def test_each_odd_reflection_value_reads_as_line_by_line(tmp_path: Path, key: str,
                                                         value: Any) -> None:
    plain = {"task_id": "T1", "iteration": 1, "gate": "lint", "source": "rules",
             "diagnosis": {"why": "w"}, "timestamp": 1767225600.0}
    (fast, _), (slow, _) = read_both(tmp_path, "reflections.jsonl", [
        json.dumps(line).encode() for line in (plain, {**plain, key: value}, plain)],
        Kind.REFLECTIONS)
    assert _reflections_seen(fast) == _reflections_seen(slow)


def test_reflections_as_the_engine_writes_them_are_typed() -> None:
    line = (b'{"timestamp": 1767225600.0, "task_id": "b872fa4e30e4", "iteration": 0, '
            b'"model": "opus", "gate": "lint", "error_pattern": "lint:E0", "digest": "d", '
            b'"diagnosis": {"what_failed": "w", "why": "y", "try_next": "t", "focus": "f"}, '
            b'"files_changed": ["src/m0.py"], "reused": true, "source": "rules"}\n')
    records = REFLECTIONS.decode(line * 3, 1)
    assert records is not None and len(records) == 3
    assert records[0].files_changed == ("src/m0.py",) and records[0].focus == "f"
