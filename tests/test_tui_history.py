"""#19.2 The event history: engine events, SLA events, gate blocks, phase gates and
proposal decisions read back from the files on start, plus the session's own actions
and notifications, newest first, filtered as you type; Enter goes to the task."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input

from console.tui.app import ConsoleApp
from console.tui.history import Session, entries
from console.tui.screens.history import HistoryScreen
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.security.display_kit import EVIL, assert_text_only
from tests.test_tui import wait_for


def _files(root: Path) -> None:
    sdd = root / ".sdd"
    append(sdd / "runtime/tasks.jsonl", task_record("T1", "failed", title="Parser"),
           task_record("T2", "done", title="Docs"))
    append(sdd / "runtime/engine_events.jsonl",
           {"level": "error", "message": f"T1: agent crashed {EVIL}", "timestamp": 100.0,
            "task_id": "T1"},
           {"level": "info", "message": "ingested T2: Docs", "timestamp": 50.0,
            "task_id": "T2"})
    append(sdd / "metrics/sla_events.jsonl",
           {"event": "sla:violated", "entity_id": "T1", "entity_type": "task",
            "deadline": 90.0, "timestamp": 95.0})
    append(sdd / "metrics/quality_gates.jsonl",
           {"task_id": "T1", "gate": "lint", "status": "fail", "result": "blocked",
            "timestamp": 80.0, "duration_ms": 5, "cached": False, "required": True})
    append(sdd / "evolution/decisions.jsonl",
           {"proposal_id": "EVO-1", "risk_level": "logic", "confidence": 0.8,
            "outcome": "human_review_4h", "reason": "L2 — review", "requires_human": True,
            "decided_at": 70.0, "reviewer": None})


def _texts(app: ConsoleApp) -> list[str]:
    table = app.screen.query_one(DataTable)
    return [" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]


def test_entries_are_newest_first_from_every_source(project: Path) -> None:
    from console.sdd.source import LocalSource

    _files(project)
    source = LocalSource(project)
    source.load()
    session = Session()
    session.action("retry", False, "task T2 is done; only a failed task can be retried")
    session.note("task T2 is done; only a failed task can be retried", "error")  # the same
    with source.lock:
        found = entries(source.state, session)
    kinds = [e.kind for e in found]
    assert kinds == ["action", "engine", "sla", "gate", "proposal", "engine"]
    assert [e.timestamp for e in found[1:]] == [100.0, 95.0, 80.0, 70.0, 50.0]


async def test_the_history_screen_filters_and_goes_to_the_task(project: Path) -> None:
    _files(project)
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: len(table.task_ids) == 2)
        table.move_to("T2")
        await wait_for(pilot, lambda: app.selected == "T2")
        await pilot.press("r")  # refused: said, and kept in the session's history
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await wait_for(pilot, lambda: len(_texts(app)) == 6)
        rows = _texts(app)
        assert "only a failed task can be retried" in rows[0]  # the newest: this session
        assert "agent crashed" in rows[1] and "SLA violated" in rows[2]
        assert_text_only("\n".join(rows), "the history")
        await pilot.press("slash")
        await pilot.press(*"sla")
        await wait_for(pilot, lambda: len(_texts(app)) == 1)
        assert app.screen.query_one(Input).value == "sla"
        await pilot.press("enter")  # into the list, then enter on the entry: its task
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, HistoryScreen))
        await wait_for(pilot, lambda: app.selected == "T1")
