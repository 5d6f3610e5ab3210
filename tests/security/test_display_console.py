"""The console on a project whose every displayed field is hostile (issue #16 part 1):
every screen, tab, modal, palette entry and notification is opened with Pilot; the
app keeps running, and what it renders (its own screenshot, `export_screenshot()`)
holds no ESC, no other control character and no bidi override — the corpus is shown
as visible escapes. Copying a task whose id is `T-[/]-1` works and says so."""

from __future__ import annotations

import html
from pathlib import Path

from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import Static, TabbedContent

from console.action_rules import escalate_refusal
from console.tui.app import ConsoleApp
from console.tui.screens.chains import ChainsScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.problems import ProblemsScreen
from console.tui.screens.proposals import ProposalsScreen, ReasonScreen
from console.tui.screens.quality import QualityScreen
from console.tui.widgets.task_detail import TaskDetail
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append
from tests.security.display_kit import (
    EVIL,
    MARKUP_ID,
    OSC8_URL,
    OSC52_PAYLOAD,
    TASK_ID,
    assert_text_only,
    write_hostile_project,
)
from tests.test_tui import plain, wait_for

NOW = 1_800_000_000.0
SIZE = (160, 50)


def _shown(app: ConsoleApp, where: str) -> str:
    """What the app draws now (the top screen, its modals and toasts), checked."""
    assert app.is_running, f"{where}: the console ended"
    svg = app.export_screenshot()
    assert_text_only(svg, where)
    assert OSC8_URL not in svg or "\\x1b]8" in svg, where
    return html.unescape(svg).replace("\xa0", " ")


async def _loaded(pilot, app: ConsoleApp) -> TaskTable:  # type: ignore[no-untyped-def]
    table = app.query_one(TaskTable)
    await wait_for(pilot, lambda: app.loaded and table.row_count >= 3, timeout=20)
    await wait_for(pilot, lambda: app.query_one(TaskDetail).active, timeout=20)
    return table


async def test_every_view_shows_the_hostile_corpus_as_text(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=NOW)
    app = ConsoleApp(tmp_path, clock=lambda: NOW)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        table = await _loaded(pilot, app)
        # news after the first load is announced: hostile text in three toasts
        sdd = tmp_path / ".sdd"
        append(sdd / "runtime" / "engine_events.jsonl", {"level": "error", "message": EVIL})
        append(sdd / "metrics" / "sla_events.jsonl",
               {"event": "sla:violated", "entity_id": MARKUP_ID, "entity_type": EVIL})
        append(sdd / "evolution" / "deferred.jsonl", {
            "proposal_id": "EVO-new[/]", "title": EVIL, "confidence": 0.5})
        await wait_for(pilot, lambda: "awaits your approval" in _shown(app, "toasts"))
        await wait_for(pilot, lambda: "SLA violated" in _shown(app, "toasts"))
        table.move_to(TASK_ID)
        await wait_for(pilot, lambda: app.selected == TASK_ID)
        await pilot.pause(0.3)
        main = _shown(app, "main screen")
        assert "\\x1b]52;c;" in main  # shown, as an escape, not obeyed
        tabs = app.query_one(TabbedContent)
        for pane in ("tab-gates", "tab-chain", "tab-reflections", "tab-review", "tab-log"):
            tabs.active = pane
            await pilot.pause(0.3)
            _shown(app, pane)
        pane = app.query_one("#detail-log", Static)
        await wait_for(pilot, lambda: "agent says hi" in plain(pane), timeout=10)
        _shown(app, "log tab")
        log = pane.content
        assert isinstance(log, Text)
        assert_text_only(log.plain, "the log's text")
        # the log drops escape sequences entirely, and keeps the agent's colours
        assert OSC52_PAYLOAD not in log.plain and OSC8_URL not in log.plain
        assert "hidden text" in log.plain  # SGR 8 (conceal) dropped: the text is seen
        coloured = {log.plain[span.start:span.end] for span in log.spans}
        assert {"red", "bold green"} <= coloured
        for key, screen in (("C", ChainsScreen), ("M", QualityScreen), ("P", ProposalsScreen),
                            ("p", ProblemsScreen), ("question_mark", HelpScreen)):
            await pilot.press(key)
            await wait_for(pilot, lambda screen=screen: isinstance(app.screen, screen))
            await pilot.pause(0.3)
            _shown(app, screen.__name__)
            if screen is ProposalsScreen:
                await pilot.press("down")  # the other proposal's detail
                await pilot.pause(0.2)
                _shown(app, "the second proposal")
                await pilot.press("d")  # decline
                await wait_for(pilot, lambda: isinstance(app.screen, ReasonScreen))
                _shown(app, "reject reason modal")
                await pilot.press("escape")
                await pilot.press("a")
                await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
                _shown(app, "approve confirm modal")
                await pilot.press("n")
            await pilot.press("escape")
            await wait_for(pilot, lambda screen=screen: not isinstance(app.screen, screen))
        with app.source.lock:  # a task that may be escalated (else e refuses at once)
            target = next(t.id for t in app.source.state.tasks.values()
                          if escalate_refusal(t) is None and t.id in table.task_ids)
        assert table.move_to(target)
        await wait_for(pilot, lambda: app.selected == target)
        await pilot.press("e")  # escalate: a confirm dialog naming the task
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        _shown(app, "escalate confirm modal")
        await pilot.press("n")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.pause(0.5)
        _shown(app, "palette, discovery")
        await pilot.press(*"Task T")
        await pilot.pause(0.8)
        _shown(app, "palette, search")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
        await pilot.press("slash", *"x[/]y")  # the view line echoes the filter
        await pilot.pause(0.3)
        _shown(app, "filter")
        assert app.is_running


async def test_copying_a_markup_id_works_and_says_so(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=NOW)
    app = ConsoleApp(tmp_path, clock=lambda: NOW)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        table = await _loaded(pilot, app)
        assert table.move_to(MARKUP_ID)
        await wait_for(pilot, lambda: app.selected == MARKUP_ID)
        for key in ("c", "w", "x", "r"):  # copy id, copy worktree, cancel (asks), retry
            await pilot.press(key)
            await pilot.pause(0.3)
            if isinstance(app.screen, ConfirmScreen):
                _shown(app, f"{key}: confirm")
                await pilot.press("n")
            _shown(app, f"after {key}")
            if key == "c":  # the toasts say what was copied, the id as written
                await wait_for(pilot, lambda: f"copied {MARKUP_ID}" in _shown(app, "c"))
            if key == "w":
                await wait_for(pilot, lambda: f"task {MARKUP_ID} has no worktree" in
                               _shown(app, "w"))
        assert app.is_running
