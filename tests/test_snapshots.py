"""Snapshot tests on a recorded demo run with a frozen clock (tests/fixtures/demo-frozen,
made by scripts/freeze_demo.py), grouped by feature at fixed terminal sizes (as Posting
does), cursors not blinking. Update after a deliberate UI change with
`pytest tests/test_snapshots.py --snapshot-update`, look at the SVGs, and run
`python scripts/screenshots.py`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from console.tui.views import FILTER_DEBOUNCE_S
from tests.frozen_demo import SHOTS, SIZE, footer_up, frozen_app, no_blink, settle

SMALL = (80, 24)
TINY = (60, 20)
SnapCompare = Callable[..., bool]


@pytest.mark.parametrize("name", list(SHOTS))
def test_screen(name: str, snap_compare: SnapCompare, tmp_path: Path) -> None:
    """Each screen at 120x40 (the README's screenshots are these)."""
    keys, screen = SHOTS[name]

    async def run_before(pilot: Pilot[int]) -> None:
        await settle(pilot, keys, screen)

    assert snap_compare(frozen_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def _shot(snap_compare: SnapCompare, tmp_path: Path, keys: tuple[str, ...], screen: str,
          size: tuple[int, int] = SIZE, typed: str = "") -> bool:
    """The frozen demo after `keys` (then `typed` into the focused input), at `size`."""

    async def run_before(pilot: Pilot[int]) -> None:
        await settle(pilot, keys, screen)
        no_blink(pilot.app)
        if typed:
            main = pilot.app.screen
            # typed at once: key by key, a slow machine may apply a prefix on the way
            # ("c" narrows the table, then "colour:red" is refused over that view)
            main.query_one("#filter", Input).value = typed
            for _ in range(200):  # typing is applied once it pauses: until it is
                if main.filter_tried == typed.strip():
                    break
                await pilot.pause(FILTER_DEBOUNCE_S)
            await settle(pilot, (), screen)

    return snap_compare(frozen_app(tmp_path), terminal_size=size, run_before=run_before)


class TestModals:
    def test_confirm_names_the_task_and_the_effect(self, snap_compare: SnapCompare,
                                                   tmp_path: Path) -> None:
        """x on DEMO-05 (stranded, so cancellable): the confirm dialog over the main
        screen (x on a failed task is refused before any question, #19.7)."""
        assert _shot(snap_compare, tmp_path, ("down",) * 4 + ("x",), "ConfirmScreen")

    def test_reject_asks_for_a_reason(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        assert _shot(snap_compare, tmp_path, ("P", "d"), "ReasonScreen")

    @pytest.mark.parametrize("size", [SIZE, SMALL, TINY], ids=["120x40", "80x24", "60x20"])
    def test_quit_asks_while_agents_work(self, size: tuple[int, int],
                                         snap_compare: SnapCompare, tmp_path: Path) -> None:
        """What q asks while two agents run (the recording has no engine, so the dialog
        is opened as q would open it): stop, detach or cancel, whole at 60x20."""
        from console.tui.screens.quit_dialog import QuitDialog

        async def run_before(pilot: Pilot[int]) -> None:
            await settle(pilot, (), "MainScreen")
            pilot.app.push_screen(QuitDialog(2, detachable=True))
            await settle(pilot, (), "QuitDialog")
            no_blink(pilot.app)

        assert snap_compare(frozen_app(tmp_path), terminal_size=size, run_before=run_before)


class TestFilter:
    def test_typed_filter_narrows_the_table(self, snap_compare: SnapCompare,
                                            tmp_path: Path) -> None:
        assert _shot(snap_compare, tmp_path, ("slash",), "MainScreen", typed="state:done")

    def test_a_bad_term_is_said_on_the_view_line(self, snap_compare: SnapCompare,
                                                 tmp_path: Path) -> None:
        assert _shot(snap_compare, tmp_path, ("slash",), "MainScreen", typed="colour:red")


class TestEmptyProject:
    """No rows: what to do next, with the project as typed from the working directory."""

    @pytest.mark.parametrize("with_sdd", [False, True], ids=["no-sdd", "empty-sdd"])
    def test_says_how_to_start(self, with_sdd: bool, snap_compare: SnapCompare,
                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from console.sdd.skeleton import init_project
        from console.tui.app import ConsoleApp

        project = tmp_path / "new-project"
        project.mkdir()
        if with_sdd:
            init_project(project)
        monkeypatch.chdir(tmp_path)
        text = "No tasks yet" if with_sdd else "No .sdd/ directory"

        async def run_before(pilot: Pilot[int]) -> None:
            for _ in range(200):
                empty = pilot.app.screen.query("#empty")  # (composed after the app is up)
                if empty and text in str(empty.first().render()) and footer_up(pilot.app):
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.1)

        assert snap_compare(ConsoleApp(project, label="a new project"), terminal_size=SIZE,
                            run_before=run_before)


class TestSmallTerminal:
    """80x24 and 60x20: the table gives way before the title; the footer keeps ? Help;
    the dialogs fit."""

    CASES: dict[str, tuple[tuple[str, ...], str, str]] = {
        "main": (("down",) * 4, "MainScreen", ""),
        "confirm": (("down",) * 4 + ("x",), "ConfirmScreen", ""),
        "filter": (("slash",), "MainScreen", "state:done"),
        "proposals": (("P",), "ProposalsScreen", ""),
    }

    @pytest.mark.parametrize("size", [SMALL, TINY], ids=["80x24", "60x20"])
    @pytest.mark.parametrize("case", list(CASES))
    def test_fits(self, case: str, size: tuple[int, int], snap_compare: SnapCompare,
                  tmp_path: Path) -> None:
        keys, screen, typed = self.CASES[case]
        assert _shot(snap_compare, tmp_path, keys, screen, size=size, typed=typed)
