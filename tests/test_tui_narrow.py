"""Small terminals (#19.6): below 100 columns the task table gives way before the title
(P, Try, Gates as glyphs, then Role and Model dropped, then State and SLA as glyphs);
narrower still, → scrolls it; notifications stay off the table; the footer keeps ? Help
and the dialogs fit, at 80x24 and 60x20."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Footer

from console.tui.app import ConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.task_rows import COLUMNS
from console.tui.widgets.table_layout import TITLE_MIN, fit
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.test_tui import wait_for

TITLE = "Port the legacy pricing engine to the new rules"


def _shown(width: int) -> list[str]:
    return [COLUMNS[index].key for index in fit(width).columns]


def test_columns_give_way_before_the_title() -> None:
    assert _shown(120) == [c.key for c in COLUMNS] and not fit(100).compact
    for width in range(30, 100):
        layout = fit(width)
        title = layout.widths[layout.columns.index(len(COLUMNS) - 1)]
        assert title >= TITLE_MIN, width
        assert layout.total == max(width, sum(w + 1 for w in layout.widths)), width
    assert fit(90).compact == {"priority", "attempt", "gates"} and "role" in _shown(90)
    assert "role" not in _shown(80) and "model" in _shown(80)
    assert fit(60).compact >= {"state"} and "model" not in _shown(60)
    assert fit(40).total > 40  # too narrow for any layout: the line scrolls


def _project(root: Path) -> None:
    append(root / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("LEGACY-1", "failed", title=TITLE, model="opus"),
           *(task_record(f"t{i}", "open") for i in range(3)))


def _console(project: Path) -> ConsoleApp:
    _project(project)
    return ConsoleApp(project)


async def _listed(pilot: Pilot[int], app: ConsoleApp) -> TaskTable:
    table = app.query_one(TaskTable)
    await wait_for(pilot, lambda: table.row_count == 4)
    await pilot.pause(0.1)
    return table


def _header(table: TaskTable) -> str:
    return "".join(segment.text for segment in table.render_line(0))


def _row(table: TaskTable) -> str:
    return "".join(segment.text for segment in table.render_line(1))


async def test_at_80_columns_the_title_is_on_screen(project: Path) -> None:
    app = _console(project)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _listed(pilot, app)
        assert "Title" in _header(table) and "Role" not in _header(table)
        assert "Port the legacy" in _row(table) and "✗ failed" in _row(table)
        assert table.virtual_size.width == table.line_width  # nothing to scroll to


async def test_narrower_still_the_table_scrolls_sideways(project: Path) -> None:
    app = _console(project)
    async with app.run_test(size=(44, 20)) as pilot:
        table = await _listed(pilot, app)
        assert table.virtual_size.width > table.line_width
        before = _row(table)
        assert "Port the legacy" not in before  # the title column is cut by the edge
        await pilot.press("right", "right")
        await wait_for(pilot, lambda: table.scroll_x > 0)
        await wait_for(pilot, lambda: "Port the legacy" in _row(table))
        assert "Title" in _header(table)
        await pilot.press("left", "left")
        await wait_for(pilot, lambda: table.scroll_x == 0 and _row(table) == before)


async def test_notifications_stay_off_the_table_and_the_footer_keeps_help(
        project: Path) -> None:
    _project(project)
    app = ConsoleApp(project)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 4)
        await wait_for(pilot, lambda: bool(app.screen.query(Footer)))
        for i in range(3):
            app.notify(f"retry: task t{i} is open again; its next attempt runs on haiku")
        await wait_for(pilot, lambda: len(app.screen.query("Toast")) == 3)
        await pilot.pause(0.3)
        for toast in app.screen.query("Toast"):
            assert not toast.region.overlaps(table.region), (toast.region, table.region)
        shown = [key for key, active in app.screen.active_bindings.items()
                 if active.binding.show]
        assert "question_mark" in shown and "q" in shown
        footer = app.screen.query_one(Footer)
        keys = [child for child in footer.children if getattr(child, "key", None)]
        right = max(child.region.right for child in keys)
        assert right <= footer.region.right  # every key it lists is on screen


async def test_the_confirm_dialog_fits_60x20(project: Path) -> None:
    _project(project)
    app = ConsoleApp(project)
    async with app.run_test(size=(60, 20)) as pilot:
        await wait_for(pilot, lambda: app.selected == "LEGACY-1")
        app.query_one(TaskTable).move_to("t0")  # open: cancel asks (a failed one is refused)
        await wait_for(pilot, lambda: app.selected == "t0")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.2)
        dialog = app.screen.query_one("#confirm")
        assert app.screen.region.contains_region(dialog.region), dialog.region
        for button in app.screen.query("Button"):
            assert dialog.region.contains_region(button.region), button.region
        await pilot.press("n")
