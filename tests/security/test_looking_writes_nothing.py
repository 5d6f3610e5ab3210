"""Looking changes nothing (issue #32 point 7, DESIGN §7): `status`, `status --json` and
a watch-only console (untrusted, `--read-only`, or one whose engine another process
runs), each run for real, leave every byte, mtime and name in the project's tree as it
was, and keep their checkpoint in this user's cache (XDG_CACHE_HOME), named by the sha256
of the project's real path. A checkpoint planted where older versions kept it, inside
the project's .sdd/, is never read: what is shown comes from the files."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from console.sdd.paths import SddPaths
from tests.pty_kit import PtyConsole
from tests.security.looking_kit import (
    LEGACY_CHECKPOINT,
    PER_STATE,
    STATES,
    TASKS,
    changed,
    make_project,
    tree,
    until,
)


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This test's own cache, state (the checkpoint key) and config (trust) homes; the
    environment the commands run with."""
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    env = dict(os.environ)
    env.pop("BERNSTEIN_TUI_DEBUG", None)
    return env


@pytest.fixture
def project(tmp_path: Path, homes: dict[str, str]) -> Path:
    return make_project(tmp_path)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd="/", check=True)


def expected_checkpoint(root: Path) -> Path:
    real = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()
    return (Path(os.environ["XDG_CACHE_HOME"]) / "bernstein-tui" / "checkpoints"
            / f"{real}.ckpt")


def assert_real_counts(summary: dict[str, Any]) -> None:
    assert summary["tasks"]["total"] == TASKS
    assert summary["tasks"]["by_state"] == {state: PER_STATE for state in STATES}


def _console_quits(root: Path, env: dict[str, str], *args: str) -> None:
    """The console on a pty until it has read everything and checkpointed, then `q`."""
    console = PtyConsole(root, env, *args)
    try:
        assert until(SddPaths(root).checkpoint.is_file), (
            "the console wrote no checkpoint: " + console.output[-2000:].decode(errors="replace"))
        console.press(b"q")
        assert console.wait() is not None, "the console did not quit"
    finally:
        console.kill()
        console.close()


def test_status_and_a_watch_only_console_write_nothing_into_the_project(
        project: Path, homes: dict[str, str], tmp_path: Path) -> None:
    link = tmp_path / "link-to-project"
    link.symlink_to(project)
    before = tree(project)

    printed = cli(homes, "-C", str(link), "status").stdout  # cold: writes its checkpoint
    assert f"Tasks in {project}: {TASKS}" in " ".join(printed.split())
    assert expected_checkpoint(project).is_file()  # this user's cache, by the real path
    assert_real_counts(json.loads(cli(homes, "-C", str(project), "status", "--json").stdout))
    cli(homes, "-C", str(project), "proposals", "--json")
    assert changed(before, tree(project)) == []

    expected_checkpoint(project).unlink()  # the console writes its own
    _console_quits(project, homes)  # untrusted: watch-only
    assert expected_checkpoint(project).is_file()
    expected_checkpoint(project).unlink()
    _console_quits(project, homes, "--read-only")
    assert changed(before, tree(project)) == []


def test_a_console_whose_engine_another_process_runs_writes_nothing(
        project: Path, homes: dict[str, str]) -> None:
    from console.engine.lock import EngineLock
    from console.sdd.trust import trust

    trust(project)  # (recorded in this user's config: the project is not touched)
    with EngineLock(SddPaths(project)):  # another engine holds the project
        before = tree(project)
        _console_quits(project, homes)
        assert changed(before, tree(project)) == []
    assert expected_checkpoint(project).is_file()


def _plant_a_crafted_checkpoint(root: Path) -> None:
    """A checkpoint sealed with this user's key, valid for the files as they are, that
    says every task is cancelled — where older versions kept it, inside the project."""
    from console.sdd.source import LocalSource

    source = LocalSource(root, checkpoint_after=0)
    source.load()
    source.state.restore_tasks({task_id: replace(task, status="cancelled")
                                for task_id, task in source.state.tasks.items()})
    assert source.save_checkpoint(force=True)
    made, legacy = SddPaths(root).checkpoint, root / LEGACY_CHECKPOINT
    if made != legacy:
        legacy.parent.mkdir(parents=True, exist_ok=True)
        os.replace(made, legacy)


def test_a_checkpoint_planted_in_the_project_is_never_read(
        project: Path, homes: dict[str, str]) -> None:
    from console.tui.app import ConsoleApp
    from console.tui.widgets.task_table import TaskTable
    from tests.test_tui import wait_for

    _plant_a_crafted_checkpoint(project)
    before = tree(project)
    printed = cli(homes, "-C", str(project), "status").stdout
    assert "cancelled" not in printed
    assert_real_counts(json.loads(cli(homes, "-C", str(project), "status", "--json").stdout))

    async def console() -> None:  # what the CLI's console runs, watch-only (untrusted)
        app = ConsoleApp(project, engine=True)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.source.loaded.is_set(), timeout=60)
            table = app.query_one(TaskTable)
            await wait_for(pilot, lambda: table.row_count == TASKS, timeout=30)
            with app.source.lock:
                shown = {task.status for task in app.source.state.tasks.values()}
            assert shown == set(STATES)
            assert app.engine is None

    asyncio.run(console())
    assert changed(before, tree(project)) == []


def test_a_project_without_sdd_is_looked_at_and_left_without_one(
        tmp_path: Path, homes: dict[str, str]) -> None:
    """No skeleton made on open: the console says there is no .sdd/ (its supervisor has
    run, the engine refused: untrusted) and `status` exits 2; the tree is as it was."""
    from console.tui.app import ConsoleApp
    from tests.engine_kit import git
    from tests.test_tui import wait_for

    root = tmp_path / "bare-project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "bernstein.yaml").write_text("workers: 1\n")
    before = tree(root)
    refused = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "status"],
                             capture_output=True, text=True, timeout=60, env=homes, cwd="/")
    assert refused.returncode == 2 and "no .sdd/ directory here" in refused.stderr

    async def console() -> None:
        app = ConsoleApp(root, engine=True)
        async with app.run_test(size=(120, 30)) as pilot:
            empty = app.query_one("#empty")
            await wait_for(pilot, lambda: "No .sdd/ directory" in str(empty.render()))
            await asyncio.sleep(2 * 2.0 + 0.5)  # two of the supervisor's rounds
            assert app.engine is None

    asyncio.run(console())
    assert changed(before, tree(root)) == []


def test_a_relative_xdg_cache_home_does_not_put_the_cache_in_the_project(
        project: Path, homes: dict[str, str], tmp_path: Path) -> None:
    """`status` run from inside the project with XDG_CACHE_HOME=.cache (relative: the XDG
    spec ignores it) keeps its checkpoint under ~/.cache, not in the project."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**homes, "HOME": str(home), "XDG_CACHE_HOME": ".cache"}
    before = tree(project)
    subprocess.run([sys.executable, "-m", "console", "status", "--json"], env=env,
                   cwd=project, capture_output=True, timeout=120, check=True)
    assert changed(before, tree(project)) == []
    assert list((home / ".cache" / "bernstein-tui" / "checkpoints").glob("*.ckpt"))
