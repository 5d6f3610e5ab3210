"""The task table's rows, filter and sort, as pure functions of the State."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.sdd.source import LocalSource
from console.tui.task_rows import (
    SORT_KEYS,
    FilterError,
    countdown,
    parse_filter,
    row_of,
    sla_cell,
)
from tests.conftest import append, task_record

NOW = 1_800_000_000.0


@pytest.fixture
def rows(project: Path):
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl",
           task_record("a1", "failed", title="Parser crash", role="qa", priority=1,
                       model="haiku", metadata={"attempt": 2, "chain": [{"model": "sonnet"}]}),
           task_record("b2", "open", title="Docs", role="docs", priority=3,
                       deadline=NOW + 125, created_at=NOW - 100),
           task_record("c3", "in_progress", title="Late", deadline=NOW - 5, created_at=NOW - 60),
           task_record("d4", "done", title="Finished", deadline=NOW - 50))
    append(sdd / "metrics" / "quality_gates.jsonl",
           {"task_id": "a1", "gate": "lint", "status": "fail", "result": "blocked"},
           {"task_id": "a1", "gate": "tests", "status": "pass", "result": "pass"},
           {"task_id": "a1", "gate": "types", "status": "timeout", "result": "blocked"})
    append(sdd / "metrics" / "sla_events.jsonl",
           {"event": "sla:warning", "entity_id": "b2", "entity_type": "task"},
           {"event": "sla:met", "entity_id": "d4", "entity_type": "task"})
    source = LocalSource(project)
    source.load()
    return {i: row_of(source.state, i) for i in ("a1", "b2", "c3", "d4")}


def test_cells_say_state_attempt_gates_and_sla_in_glyph_and_word(rows) -> None:
    a1 = rows["a1"].cells(NOW)
    assert a1[:7] == ("✗ failed", "a1", "P1", "qa", "sonnet", "2/4", "✓1 ✗2")
    assert rows["b2"].cells(NOW)[7] == "⚠ 2m05s"  # warned: glyph, not colour alone
    assert rows["c3"].cells(NOW)[7] == "✗ -5s"
    assert rows["d4"].cells(NOW)[7] == "✓ met"
    assert rows["b2"].at_risk(NOW) and rows["c3"].at_risk(NOW)
    assert not rows["a1"].at_risk(NOW) and not rows["d4"].at_risk(NOW)


def test_countdown_formats() -> None:
    assert [countdown(s) for s in (0, 9.9, 61, 3725, -61)] == ["0s", "9s", "1m01s", "1h02m",
                                                              "-1m01s"]


def _ids(rows, text: str) -> list[str]:
    predicate = parse_filter(text)
    return [i for i, r in rows.items() if predicate is None or predicate(r, NOW)]


def test_filter_terms(rows) -> None:
    assert _ids(rows, "") == ["a1", "b2", "c3", "d4"]
    assert _ids(rows, "state:failed") == ["a1"]
    assert _ids(rows, "state:open,in_prog") == ["b2", "c3"]
    assert _ids(rows, "-state:done") == ["a1", "b2", "c3"]
    assert _ids(rows, "PARSER") == ["a1"]  # words: id, title or role, any case
    assert _ids(rows, "role:docs") == ["b2"]
    assert _ids(rows, "model:son") == ["a1"]
    assert _ids(rows, "p:1,3") == ["a1", "b2"]
    assert _ids(rows, "sla:risk") == ["b2", "c3"]
    assert _ids(rows, "sla:violated") == ["c3"]
    assert _ids(rows, "gates:fail") == ["a1"]
    assert _ids(rows, "gates:none state:open") == ["b2"]


@pytest.mark.parametrize(("text", "said"), [
    ("colour:red", "unknown filter 'colour:'"), ("p:high", "'p:high': a priority is a number"),
    ("sla:soon", "'sla:soon': use sla:risk"), ("state:", "'state:' needs a value"),
])
def test_a_filter_term_that_means_nothing_is_named(text: str, said: str) -> None:
    with pytest.raises(FilterError, match=said):
        parse_filter(text)


def test_sort_keys_order_rows(rows) -> None:
    def order(key: str) -> list[str]:
        return sorted(rows, key=lambda i: SORT_KEYS[key](rows[i]))  # type: ignore[arg-type, return-value]

    assert order("priority")[0] == "a1" and order("priority")[-1] == "b2"
    assert order("sla") == ["c3", "b2", "a1", "d4"]  # nearest deadline first, none last
    assert order("gates")[0] == "a1"
    assert order("state") == ["b2", "c3", "d4", "a1"]  # the state machine's order
    assert sla_cell(rows["a1"], NOW) == ""
