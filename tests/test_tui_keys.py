"""Keys per screen (#19.5): a key is bound where its target is shown; every list moves
with j k g G and opens with Enter; reject is d (decline), not j; no destructive key has a
shifted twin that opens a view."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Tabs

from console.tui.app import ConsoleApp
from console.tui.keys import APP_BINDINGS, MAIN_BINDINGS
from console.tui.screens.chains import ChainsScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.problems import ProblemsScreen
from console.tui.screens.proposals import ProposalsScreen, ReasonScreen
from console.tui.screens.quality import QualityScreen
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.test_tui import wait_for
from tests.test_tui_views import _chain

TASK_KEYS = {"r", "e", "x", "slash", "d", "enter"}
#: actions that change the project, the engine or the app's life
DESTRUCTIVE = {"retry", "escalate", "cancel_task", "pause", "trust", "quit", "approve",
               "reject"}
VIEWS = {"proposals", "chains", "quality", "problems", "help"}


def _project(root: Path) -> None:
    append(root / ".sdd" / "runtime" / "tasks.jsonl",
           *(task_record(f"t{i}", "failed" if i == 0 else "open", title=f"Task {i}")
             for i in range(4)))
    append(root / ".sdd" / "metrics" / "cascade_chains.jsonl",
           _chain("ch-new", "t2", 200.0), _chain("ch-old", "t1", 100.0))


async def _on_the_first_task(pilot: Pilot[int], app: ConsoleApp) -> TaskTable:
    table = app.query_one(TaskTable)
    await wait_for(pilot, lambda: table.row_count == 4 and app.selected == "t0")
    return table


def _keys(screen: Screen[object]) -> set[str]:
    return set(screen.active_bindings)


async def test_task_keys_act_only_on_the_main_screen(project: Path) -> None:
    _project(project)
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = await _on_the_first_task(pilot, app)
        assert _keys(app.screen) >= TASK_KEYS
        for key, screen in (("P", ProposalsScreen), ("C", ChainsScreen), ("M", QualityScreen),
                            ("question_mark", HelpScreen), ("p", ProblemsScreen)):
            await pilot.press(key)
            await wait_for(pilot, lambda screen=screen: isinstance(app.screen, screen))
            shown = _keys(app.screen)
            assert not {"r", "e", "x", "slash"} & shown, (screen.__name__, shown)
            await pilot.press("r", "x", "slash")  # nothing reaches the hidden table
            await pilot.pause(0.2)
            assert isinstance(app.screen, screen) and not isinstance(app.screen, ConfirmScreen)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main)
        assert table.rows["t0"].status == "failed"
        assert not app.main.query_one("#filter").display  # / never opened the filter


async def test_an_empty_project_offers_no_task_keys_until_a_task_comes(project: Path) -> None:
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "No tasks yet" in str(app.query_one("#empty").render()))
        assert not _keys(app.screen) & TASK_KEYS and {"P", "question_mark", "q"} <= _keys(
            app.screen)
        await pilot.press("r", "slash")  # refused quietly: nothing to act on
        assert not app.main.query_one("#filter").display
        append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("n1", "failed"))
        await wait_for(pilot, lambda: _keys(app.screen) >= TASK_KEYS)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.query_one(TaskTable).rows["n1"].status == "open")


async def test_j_k_g_G_and_enter_in_the_task_table(project: Path) -> None:
    _project(project)
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = await _on_the_first_task(pilot, app)
        await wait_for(pilot, lambda: app.main.query_one("TaskDetail").active)
        for key, expected in (("j", "t1"), ("j", "t2"), ("k", "t1"), ("G", "t3"), ("g", "t0")):
            await pilot.press(key)
            await wait_for(pilot, lambda expected=expected: app.selected == expected)
        await pilot.press("enter")  # the task opened: its tabs take the body
        await wait_for(pilot, lambda: not table.display)
        assert isinstance(app.focused, Tabs)
        detail = app.main.query_one("#detail")
        assert detail.region.y <= table.region.y + 4  # where the table was
        await pilot.press("escape")
        await wait_for(pilot, lambda: table.display and app.focused is table)
        assert app.selected == "t0"


async def test_lists_on_other_screens_move_and_open_with_the_same_keys(project: Path) -> None:
    from console.engine.evolution import Proposal, record_proposal, unified_diff
    from console.sdd.paths import SddPaths
    from tests.test_evolution import CONFIG

    _project(project)
    for pid in ("EVO-a", "EVO-b"):
        record_proposal(SddPaths(project), Proposal(
            pid, f"Proposal {pid}", "policy_update", "because", 0.8, ("bernstein.yaml",),
            unified_diff("bernstein.yaml", CONFIG, CONFIG + f"# {pid}\n")),
            "human_review_4h", "L2 — review")
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.loaded and app.selected == "t0")
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ChainsScreen))
        chains = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: chains.row_count == 2)
        await pilot.press("G")
        await wait_for(pilot, lambda: chains.cursor_row == 1)
        await pilot.press("k")
        await wait_for(pilot, lambda: chains.cursor_row == 0)
        await pilot.press("enter")  # ch-new's task: back on the main screen, on t2
        await wait_for(pilot, lambda: app.screen is app.main and app.selected == "t2")

        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ProposalsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.selected == "EVO-a")
        await pilot.press("j")
        await wait_for(pilot, lambda: screen.selected == "EVO-b")
        await pilot.press("enter")  # into the diff
        await wait_for(pilot, lambda: app.focused is screen.query_one("#proposal-detail"))
        await pilot.press("escape")  # back to the list, still on the screen
        await wait_for(pilot, lambda: app.focused is screen.query_one(DataTable))
        assert app.screen is screen
        await pilot.press("d")  # decline: asks for the reason
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonScreen))
        await pilot.press("escape", "escape")
        await wait_for(pilot, lambda: app.screen is app.main)


def test_no_destructive_key_has_a_view_as_its_shifted_twin() -> None:
    bound: dict[str, str] = {}
    for binding in [*APP_BINDINGS, *MAIN_BINDINGS, *ProposalsScreen.BINDINGS]:
        for key in binding.key.split(","):
            bound[key] = binding.action.split("(")[0].removeprefix("app.")
    clashes = [(key, action, bound[twin]) for key, action in bound.items()
               if action in DESTRUCTIVE and len(key) == 1 and key.isalpha()
               for twin in (key.swapcase(),) if bound.get(twin) in VIEWS]
    assert clashes == []
    assert bound["d"] == "reject" or bound.get("j") != "reject"
    assert "Q" not in bound and bound["M"] == "quality"
