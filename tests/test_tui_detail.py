"""#19 "The Log tab shows the wrong task": whatever changes the selection — a key, or a
quick filter that leaves no rows — every detail tab follows it, the Log tab included."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import TabbedContent

from console.tui.app import ConsoleApp
from console.tui.widgets.task_detail import TABS, TaskDetail
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.test_tui import plain, wait_for


async def test_every_tab_follows_the_selection_made_with_keys(project: Path) -> None:
    runtime = project / ".sdd" / "runtime"
    append(runtime / "tasks.jsonl",
           task_record("ran", "failed", title="Ran once", metadata={"log": ".sdd/runtime/a.log"}),
           task_record("never", "open", title="Never ran"))
    (runtime / "a.log").write_text("agent output of the task that ran\n")
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["ran", "never"])
        await wait_for(pilot, lambda: app.query_one(TaskDetail).active)
        log = app.query_one("#detail-log")
        await wait_for(pilot, lambda: "agent output of the task that ran" in plain(log))
        await pilot.press("tab", *["right"] * (len(TABS) - 1))  # to the Log tab
        tabs = app.query_one("#detail-tabs", TabbedContent)
        await wait_for(pilot, lambda: tabs.active == "tab-log")
        await pilot.press("shift+tab", "down")  # back to the table, the next task
        await wait_for(pilot, lambda: app.selected == "never")
        await wait_for(pilot, lambda: "No agent log for this task" in plain(log))
        assert "agent output" not in plain(log)
        assert "Never ran" in plain(app.query_one("#detail-summary"))

        await pilot.press("8")  # quick filter "gate failing": no row is left
        await wait_for(pilot, lambda: table.row_count == 0)
        await wait_for(pilot, lambda: app.selected is None)
        for key, _title in TABS:
            assert plain(app.query_one(f"#detail-{key}")).strip() == "Select a task.", key

        await pilot.press("0")  # every task again: the cursor's task is shown again
        await wait_for(pilot, lambda: app.selected is not None)
        shown = app.selected
        await wait_for(pilot, lambda: "Select a task." not in plain(
            app.query_one("#detail-summary")))
        title = "Ran once" if shown == "ran" else "Never ran"
        assert title in plain(app.query_one("#detail-summary"))
