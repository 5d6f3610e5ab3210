"""Workspace trust in the console (issue #15 part 2), under Pilot on a cloned hostile
project, through the default path (engine=True): an untrusted or changed project opens
watch-only and the header says why and how; `t` or the palette trusts it after a
confirm modal listing what will run, then the engine starts and runs that code."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.tui.app import ConsoleApp
from tests.conftest import run_cli
from tests.security.test_trust_cli import (  # noqa: F401 - the fixtures
    Hostile,
    config_home,
    hits,
    hostile,
    make_hostile,
)
from tests.test_tui import plain, wait_for

SETTLE_S = 1.5  # long enough for an engine that was (wrongly) starting to run something


def header(app: ConsoleApp) -> str:
    return plain(app.query_one("#status")).replace("\n", " ")


async def _opened_watch_only(app: ConsoleApp, pilot, project: Hostile, why: str) -> None:  # type: ignore[no-untyped-def]
    expected = f"⚠ {why}: run bernstein-tui -C {project.root} trust (or press t)"
    await wait_for(pilot, lambda: expected in header(app), timeout=20)
    assert "engine: off (watch-only)" in header(app)
    assert app.query_one("#status").has_class("-untrusted")
    await asyncio.sleep(SETTLE_S)
    assert app.engine is None and project.fired() == []


async def test_opening_an_untrusted_clone_runs_none_of_its_code(
        hostile: Hostile) -> None:  # noqa: F811 - the fixture
    app = ConsoleApp(hostile.root, engine=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await _opened_watch_only(app, pilot, hostile, "untrusted")
    assert run_cli("-C", str(hostile.root), "status").returncode == 0
    assert hostile.fired() == []


async def test_a_changed_or_damaged_trust_opens_watch_only_and_says_why(
        hostile: Hostile, config_home: Path) -> None:  # noqa: F811 - the fixtures
    assert run_cli("-C", str(hostile.root), "trust").returncode == 0
    (hostile.root / ".bernstein" / "gates" / "more.py").write_text("")
    app = ConsoleApp(hostile.root, engine=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await _opened_watch_only(app, pilot, hostile, ".bernstein/ changed since you trusted it")
    (config_home / "bernstein-tui" / "trust.json").write_bytes(b"\x00garbage")
    app = ConsoleApp(hostile.root, engine=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await _opened_watch_only(app, pilot, hostile,
                                 "untrusted (the trust file is damaged)")


async def test_trusting_from_the_console_lists_what_runs_then_starts_the_engine(
        tmp_path: Path, hits: tuple[list[str], int]) -> None:  # noqa: F811 - the fixture
    from console.tui.screens.confirm import ConfirmScreen

    project = make_hostile(tmp_path, hits[1], plugin="keyed")  # its own module name
    project.hits = hits[0]
    app = ConsoleApp(project.root, engine=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await _opened_watch_only(app, pilot, project, "untrusted")
        await pilot.press("ctrl+p")  # the palette's entry asks the same question
        await pilot.press(*"Trust this project")
        await pilot.pause(0.5)  # the search runs in the palette's own worker
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await asyncio.sleep(SETTLE_S)
        assert app.engine is None and project.fired() == []
        assert "untrusted" in header(app)

        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = plain(app.screen.query_one("#confirm-question"))
        effect = plain(app.screen.query_one("#confirm-effect"))
        assert question.strip() == f"Trust {project.root}?"
        assert "agent command (agents.script): " in effect
        assert "gate plugin (imported into this process): .bernstein/gates/keyed.py" in effect
        assert f"evolution command evolution.test_command: touch {project.outside}" in effect
        assert project.fired() == []  # asking runs nothing
        await pilot.press("y")
        await wait_for(pilot, lambda: "workers busy" in header(app), timeout=30)
        assert "untrusted" not in header(app)
        assert not app.query_one("#status").has_class("-untrusted")
        await wait_for(pilot, lambda: {"agent", "plugin-imported", "GET /ping"}
                       <= set(project.fired()), timeout=60)
    assert str(project.root) in run_cli("trust", "--list").stdout


async def test_the_demo_app_vouches_for_the_project_it_wrote(tmp_path: Path) -> None:
    from console.demo.project import write_demo

    target = tmp_path / "inventory"
    write_demo(target)  # as --demo does; --demo also records the trust, this checks the
    app = ConsoleApp(target, engine=True, demo=True)  # engine's explicit keyword alone
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: "workers busy" in header(app), timeout=30)
        assert "untrusted" not in header(app) and app.engine is not None
    assert str(target) not in run_cli("trust", "--list").stdout
    unvouched = ConsoleApp(target, engine=True)  # the same project, opened as any other
    async with unvouched.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: "⚠ untrusted: run bernstein-tui" in header(unvouched),
                       timeout=20)
        assert unvouched.engine is None
