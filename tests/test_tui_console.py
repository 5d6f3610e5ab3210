"""The console's keys end to end: filter, quick filters, sort, screens, palette,
copy, pause, themes remembered, every binding's action, 10,000 rows."""

from __future__ import annotations

import json
from pathlib import Path

from console.tui.app import ConsoleApp
from console.tui.keys import APP_BINDINGS, MAIN_BINDINGS
from console.tui.screens.chains import ChainsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.proposals import ProposalsScreen
from console.tui.screens.quality import QualityScreen
from console.tui.widgets.sla_strip import SlaStrip
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.test_tui import Notes, plain, wait_for

NOW = 1_800_000_000.0


def _data(project: Path) -> None:
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl",
           task_record("f1", "failed", title="Broken parser", role="qa", priority=1),
           task_record("o1", "open", title="Waiting docs", role="docs", priority=3,
                       deadline=NOW - 3, created_at=NOW - 60),
           task_record("d1", "done", title="Shipped"))
    append(sdd / "metrics" / "cascade_chains.jsonl", {
        "chain_id": "ch1", "task_id": "f1", "role": "qa", "final_model": "opus",
        "succeeded": False, "total_cost_usd": 0.25, "saved_vs_direct_opus_usd": 0.0,
        "timestamp": NOW - 10, "attempts": [
            {"model": "haiku", "attempt_number": 1, "success": False, "cost_usd": 0.05,
             "escalated": True, "escalation_reason": "lint failed"},
            {"model": "opus", "attempt_number": 2, "success": False, "cost_usd": 0.2}]})
    append(sdd / "metrics" / "quality_gates.jsonl",
           {"task_id": "f1", "gate": "lint", "status": "fail", "result": "blocked",
            "duration_ms": 120},
           {"task_id": "d1", "gate": "lint", "status": "pass", "result": "pass",
            "duration_ms": 80, "cached": True})
    append(sdd / "metrics" / "sla_events.jsonl",
           {"event": "sla:violated", "entity_id": "o1", "entity_type": "task"})


async def test_filter_quick_filters_and_sort_from_the_keyboard(project: Path) -> None:
    _data(project)
    app = ConsoleApp(project, clock=lambda: NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["f1", "o1", "d1"])
        await pilot.press("slash")
        await pilot.press(*"state:failed")
        await wait_for(pilot, lambda: table.task_ids == ["f1"])
        await pilot.press("enter")
        assert "filter: state:failed" in plain(app.query_one("#view-line"))
        assert "1 of 3 tasks" in plain(app.query_one("#view-line"))
        await pilot.press("escape")
        await wait_for(pilot, lambda: table.task_ids == ["f1", "o1", "d1"])
        await pilot.press("slash", *"colour:red")
        await wait_for(pilot, lambda: "unknown filter 'colour:'" in plain(
            app.query_one("#view-line")))
        await pilot.press("enter")  # refused: the box stays open to be fixed
        assert app.query_one("#filter").display
        await pilot.press("escape")
        await wait_for(pilot, lambda: table.task_ids == ["f1", "o1", "d1"])
        await pilot.press("7")  # SLA at risk
        await wait_for(pilot, lambda: table.task_ids == ["o1"])
        await pilot.press("0")
        await wait_for(pilot, lambda: len(table.task_ids) == 3)
        await pilot.press("s", "s", "s")  # state → id → priority
        await wait_for(pilot, lambda: table.sort_key == "priority")
        assert table.task_ids == ["f1", "d1", "o1"]
        await pilot.press("S")
        await wait_for(pilot, lambda: table.task_ids == ["o1", "d1", "f1"])
        assert "sort: P ▼" in plain(app.query_one("#view-line"))
        strip = app.query_one(SlaStrip)
        assert strip.display and "✗ violated o1" in str(strip.render())


async def test_screens_palette_and_copy(project: Path) -> None:
    _data(project)
    app = ConsoleApp(project, clock=lambda: NOW)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 3)
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ChainsScreen))
        totals = plain(app.screen.query_one("#chains-totals"))
        assert "1 chains" in totals and "1 escalated (100%)" in totals
        await pilot.press("escape", "M")
        await wait_for(pilot, lambda: isinstance(app.screen, QualityScreen))
        body = plain(app.screen.query_one("#quality"))
        assert "Task success: 50% (1 of 2 finished)" in body
        assert "lint" in body and "✗✓" in body and "opus" in body
        await pilot.press("escape", "question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert "Pause the engine" in plain(app.screen.query_one("#help"))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("ctrl+p")
        await pilot.press(*"Task o1")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.selected == "o1")
        await pilot.press("c")
        await wait_for(pilot, lambda: notes.said("copied o1"))
        await pilot.press("z")  # nobody runs this project: refused, and said why
        await wait_for(pilot, lambda: notes.said("no engine runs this project"))


async def test_every_binding_names_an_action_that_exists(project: Path) -> None:
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)):
        screens = [app, app.main, app.query_one(TaskTable)]
        for owner in screens:
            for binding in owner.BINDINGS:  # type: ignore[attr-defined]
                name = binding.action.split("(")[0]
                target = app if name.startswith("app.") else owner
                assert hasattr(target, f"action_{name.removeprefix('app.')}"), binding
        for screen in (ChainsScreen, QualityScreen, HelpScreen, ProposalsScreen):
            for binding in screen.BINDINGS:
                name = binding.action.split("(")[0]
                owner = app if name.startswith("app.") else screen
                assert hasattr(owner, f"action_{name.removeprefix('app.')}"), binding
    # a task key is the main screen's (it acts on its table), a screen key the app's
    assert {b.key for b in MAIN_BINDINGS} >= {"r", "e", "x", "slash"}
    assert {b.key for b in APP_BINDINGS} >= {"z", "P", "C", "M"}


async def test_the_theme_is_remembered_between_runs(project: Path) -> None:
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await wait_for(pilot, lambda: '"nord"' in _settings().read_text()
                       if _settings().exists() else False)
    again = ConsoleApp(project)
    assert again.theme == "nord"


def _settings() -> Path:
    import os

    return Path(os.environ["BERNSTEIN_TUI_CONFIG"])


async def test_ten_thousand_tasks_paint_and_scroll(project: Path) -> None:
    lines = "".join(json.dumps(task_record(f"t{i:05d}", ("open", "failed", "done")[i % 3]))
                    + "\n" for i in range(10_000))
    (project / ".sdd" / "runtime" / "tasks.jsonl").write_text(lines)
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 10_000, timeout=30)
        await pilot.press("end")
        await wait_for(pilot, lambda: app.selected == "t09999")
        assert table.scroll_y > 9_000  # the view moved with the cursor
        await pilot.press("3")  # failed only: a rebuild of the view, not of the rows
        await wait_for(pilot, lambda: table.row_count == 3_333)
        assert all(table.rows[i].status == "failed" for i in table.task_ids)


async def test_a_change_redraws_only_its_own_line(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A changed row on screen is drawn again alone; a change below the fold draws no
    row at all (the scrollbar moves); the content is still right when scrolled to."""
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i:03d}", "open", title=f"Task {i}") for i in range(100)))
    drawn: list[int] = []
    original = TaskTable.render_line

    def counting(self, y):  # type: ignore[no-untyped-def]
        drawn.append(y)
        return original(self, y)

    monkeypatch.setattr(TaskTable, "render_line", counting)
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 100)
        await wait_for(pilot, lambda: app.query_one("TaskDetail").active)
        await pilot.pause(0.3)
        drawn.clear()
        append(tasks, task_record("t090", "failed", title="Task 90"))  # below the fold
        await wait_for(pilot, lambda: table.rows["t090"].status == "failed")
        await pilot.pause(0.2)
        assert drawn == []
        append(tasks, task_record("t003", "failed", title="Task 3"))  # the fourth row
        await wait_for(pilot, lambda: table.rows["t003"].status == "failed")
        await wait_for(pilot, lambda: bool(drawn))
        await pilot.pause(0.2)
        assert set(drawn) == {4}  # under the header line
        await pilot.press("end")
        await wait_for(pilot, lambda: table.current == "t099")
        table.move_to("t090")
        await pilot.pause(0.2)
        assert table.cell("t090", "state") == "✗ failed"


async def test_every_screen_opens_with_the_keyboard_on_its_content(tmp_path: Path) -> None:
    """The app's AUTO_FOCUS names the task table; a pushed screen names its own, so ↑/↓
    work at once: in proposals ↓ selects the next proposal, also after a modal."""
    from console.engine.evolution import Proposal, record_proposal, unified_diff
    from console.sdd.paths import SddPaths
    from console.tui.screens.confirm import ConfirmScreen
    from tests.test_evolution import CONFIG, make_project

    root = make_project(tmp_path)
    for pid in ("EVO-a", "EVO-b"):
        record_proposal(SddPaths(root), Proposal(
            pid, f"Proposal {pid}", "policy_update", "because", 0.8, ("bernstein.yaml",),
            unified_diff("bernstein.yaml", CONFIG, CONFIG + f"# {pid}\n")),
            "human_review_4h", "L2 — review")
    app = ConsoleApp(root, engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.loaded)
        for key, screen in (("C", ChainsScreen), ("M", QualityScreen),
                            ("question_mark", HelpScreen)):
            await pilot.press(key)
            await wait_for(pilot, lambda screen=screen: isinstance(app.screen, screen))
            await wait_for(pilot, lambda: app.focused is not None)
            assert app.focused.screen is app.screen
            await pilot.press("escape")
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ProposalsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.selected == "EVO-a" and app.focused is not None)
        await pilot.press("down")
        await wait_for(pilot, lambda: screen.selected == "EVO-b")
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("up")
        await wait_for(pilot, lambda: screen.selected == "EVO-a")


async def test_a_task_removed_while_sorted_leaves_the_view_at_once(project: Path) -> None:
    """With a sort on, the view is rebuilt in a coalesced step; a removal must not wait
    for it (drawing a removed task found no row)."""
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i}", "open", priority=i % 3) for i in range(6)))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 6)
        await pilot.press("s", "s", "s")
        await wait_for(pilot, lambda: table.sort_key == "priority")
        tasks.write_text(json.dumps(task_record("t1", "done")) + "\n")  # the rest are gone
        await wait_for(pilot, lambda: table.task_ids == ["t1"])
        await pilot.pause(0.2)
        assert app.return_code is None and table.cell("t1", "state") == "✓ done"
