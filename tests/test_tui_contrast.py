"""#19.9: the task table's state colours are readable on every built-in theme — WCAG
contrast >= 4.5:1 against the table's background and its odd rows, computed here from
the styles the running app really draws with. (The ansi-* themes draw with the
terminal's own palette, which no program can measure.)"""

from __future__ import annotations

from pathlib import Path

from textual.color import Color
from textual.theme import BUILTIN_THEMES

from console.tui.app import ConsoleApp
from console.tui.contrast import MIN_CONTRAST, contrast, readable
from console.tui.widgets.task_table import STATE_CLASSES, TaskTable
from tests.conftest import append, task_record
from tests.test_tui import wait_for

COMPONENTS = sorted({f"task-table--{c}" for c in STATE_CLASSES.values()} | {"task-table--risk"})


def test_readable_moves_a_faint_colour_only_as_far_as_needed() -> None:
    white, yellow = Color(255, 255, 255), Color(255, 200, 0)
    assert contrast(yellow, white) < MIN_CONTRAST
    fixed = readable(yellow, white)
    assert contrast(fixed, white) >= MIN_CONTRAST
    assert fixed.r > fixed.b  # still a yellow-brown, not black
    assert readable(Color(0, 0, 0), white) == Color(0, 0, 0)  # already readable: unchanged


async def test_every_state_colour_is_readable_on_every_built_in_theme(project: Path) -> None:
    append(project / ".sdd/runtime/tasks.jsonl",
           *(task_record(f"t{i}", status) for i, status in enumerate(STATE_CLASSES)))
    app = ConsoleApp(project)
    failures = []
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: len(table.rows) == len(STATE_CLASSES))
        assert len(BUILTIN_THEMES) > 10
        for theme in BUILTIN_THEMES:
            app.theme = theme
            await pilot.pause()
            background = table.background_colors[1]
            odd = table.get_component_rich_style("task-table--odd").bgcolor
            grounds = [background] + ([Color.from_rich_color(odd)] if odd else [])
            for component in COMPONENTS:
                style = table._readable(component)  # what render_line draws with
                assert style.color is not None, (theme, component)
                ink = Color.from_rich_color(style.color)
                if ink.ansi is not None or background.ansi is not None:
                    continue  # an ansi-* theme: the terminal's own palette decides
                worst = min(contrast(ink, ground) for ground in grounds)
                if worst < MIN_CONTRAST:
                    failures.append(f"{theme} {component}: {worst:.2f}")
    assert failures == []
