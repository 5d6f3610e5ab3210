"""Issue #17 part 4 / #19 point 1: a task's Summary tab, first, shows why it is where it
is (reason, blocking dependency and its state, description, progress), for a local
`.sdd/` and a `--server` project alike; `d` jumps to the blocking dependency."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import TabbedContent

from console.remote.client import ServerClient
from console.tui.app import ConsoleApp
from console.tui.widgets.task_table import TaskTable
from tests.bernstein_server import FakeBernstein
from tests.conftest import append, task_record
from tests.security.display_kit import EVIL, HOSTILE, assert_text_only
from tests.test_remote import TOKEN
from tests.test_tui import plain, wait_for

NOW = 1_800_000_000.0


def _summary(app: ConsoleApp) -> str:
    pane = app.query_one_optional("#detail-summary")  # None until the tabs are built
    return plain(pane) if pane is not None else ""


async def _select(pilot, app: ConsoleApp, task_id: str, expect: str) -> str:  # type: ignore[no-untyped-def]
    table = app.query_one(TaskTable)
    await wait_for(pilot, lambda: task_id in table.task_ids)
    table.move_to(task_id)
    await wait_for(pilot, lambda: app.selected == task_id and expect in _summary(app))
    return _summary(app)


def _blocked_chain(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("a1", "failed", title="Parser", result_summary="tests red: 3 failures",
                       created_at=NOW - 600, completed_at=NOW - 60),
           task_record("b1", "blocked_by_failed_dep", title="Wire the CLI",
                       description="Wire the parser into the command line.",
                       depends_on=["a1"], result_summary="dependency a1 is failed",
                       terminal_reason="blocked_by_failed_dependency",
                       metadata={"blocking_task_id": "a1"}),
           task_record("c1", "open", title="Docs", depends_on=["b1"]))


async def test_a_blocked_task_says_which_dependency_failed_and_d_jumps_to_it(
        project: Path) -> None:
    _blocked_chain(project)
    app = ConsoleApp(project, clock=lambda: NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        shown = await _select(pilot, app, "b1", "dependency a1 is failed")
        assert app.query_one("#detail-tabs", TabbedContent).active == "tab-summary"
        assert "blocked_by_failed_dep" in shown
        assert "Wire the parser into the command line." in shown
        assert "blocked_by_failed_dependency" in shown
        depends = shown.split("Depends on", 1)[1].split("Needed by", 1)[0]
        assert "a1" in depends and "✗ failed" in depends and "◀ blocking" in depends
        assert "c1" in shown.split("Needed by", 1)[1]  # the dependant, with its state
        assert "○ open" in shown.split("Needed by", 1)[1]
        await pilot.press("d")
        await wait_for(pilot, lambda: app.selected == "a1")
        await wait_for(pilot, lambda: "tests red: 3 failures" in _summary(app))
        failed = _summary(app)
        assert "✗ failed" in failed
        assert time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(NOW - 60)) in failed  # completed
        await pilot.press("d")  # a1 waits on nothing: it says so and stays
        await pilot.pause(0.1)
        assert app.selected == "a1"


async def test_a_waiting_task_jumps_to_its_first_unfinished_dependency(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("p1", "done", title="Done first"),
           task_record("p2", "failed", title="Not yet"),
           task_record("w1", "planned", title="Waiter", depends_on=["p1", "p2"]),
           task_record("u1", "done", title="Unblocked since", depends_on=["p1"],
                       metadata={"blocking_task_id": "p1"}))  # left behind: not believed
    app = ConsoleApp(project, clock=lambda: NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        shown = await _select(pilot, app, "w1", "Depends on")
        assert "✓ done" in shown and "✗ failed" in shown
        await pilot.press("d")
        await wait_for(pilot, lambda: app.selected == "p2")
        shown = await _select(pilot, app, "u1", "Depends on")
        assert "◀ blocking" not in shown and "Waiting on" not in shown
        await pilot.press("d")
        await pilot.pause(0.1)
        assert app.selected == "u1"


async def test_hostile_description_and_reason_stay_text(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("h1", "failed", title="Hostile", description=EVIL,
                       result_summary=EVIL, metadata={"blocked_reason": EVIL}))
    app = ConsoleApp(project, clock=lambda: NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        shown = await _select(pilot, app, "h1", "Reason")
        assert_text_only(shown, "the Summary tab")
        for markup in ("markup_style", "markup_link", "markup_close"):
            assert HOSTILE[markup] in shown  # shown as written, never applied


@pytest.fixture
def server() -> Iterator[FakeBernstein]:
    fake = FakeBernstein(TOKEN).start()
    yield fake
    fake.stop()


async def test_the_same_summary_for_a_task_from_a_server(server: FakeBernstein,
                                                         tmp_path: Path) -> None:
    from console.cli.remote import remote_console_parts

    dep = server.add("Parser", "failed", result_summary="tests red on the server")
    blocked = server.add("Wire the CLI", "blocked_by_failed_dep", depends_on=[dep],
                         description="Served description.",
                         result_summary=f"dependency {dep} is failed",
                         metadata={"blocking_task_id": dep},
                         progress_log=[{"timestamp": NOW, "message": "half way",
                                        "percent": 50}])
    client = ServerClient(server.url, token=TOKEN, timeout=5)
    source, control = remote_console_parts(client, None, False)
    app = ConsoleApp(tmp_path, source=source, control=control)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _select(pilot, app, blocked, f"dependency {dep} is failed")
            assert "Served description." in shown
            assert "50% · half way" in shown
            assert "✗ failed" in shown.split("Depends on", 1)[1]
            await pilot.press("d")
            await wait_for(pilot, lambda: app.selected == dep)
            await wait_for(pilot, lambda: "tests red on the server" in _summary(app))
    finally:
        client.close()


async def test_a_server_task_shows_its_progress_agent_and_log_from_the_dashboard_route(
        server: FakeBernstein, tmp_path: Path) -> None:
    """#17.4 for `--server`: progress, the agent and its log come from
    `GET /dashboard/tasks/{id}`, read by a worker when the task is selected."""
    from console.cli.remote import remote_console_parts

    task_id = server.add("Long job", "claimed", assigned_agent="backend-1f2e",
                         progress_log=[{"timestamp": NOW, "message": "step 1", "percent": 10},
                                       {"timestamp": NOW, "message": "writing the parser",
                                        "percent": 40}])
    server.logs["backend-1f2e"] = f"agent says hello {EVIL}\n"
    client = ServerClient(server.url, token=TOKEN, timeout=5)
    source, control = remote_console_parts(client, None, False)
    app = ConsoleApp(tmp_path, source=source, control=control)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _select(pilot, app, task_id, "40% · writing the parser")
            assert "Last heartbeat" in shown and "status assigned" in shown
            log = app.query_one("#detail-log")
            await wait_for(pilot, lambda: "agent says hello" in plain(log))
            assert_text_only(plain(log), "the Log tab")
            assert ("GET", f"/dashboard/tasks/{task_id}") in {
                (method, path) for method, path, _ in server.requests}
    finally:
        client.close()


async def test_a_running_local_task_shows_its_progress_and_last_heartbeat(
        project: Path) -> None:
    """Bernstein's `runtime/progress/<task>.jsonl` and `runtime/heartbeats/<session>.json`
    (as its agents and our engine write them), a corrupt line skipped, the age shown."""
    now = time.time()
    runtime = project / ".sdd" / "runtime"
    append(runtime / "tasks.jsonl",
           task_record("r1", "in_progress", title="Running", assigned_agent="qa-77aa",
                       metadata={"log": ".sdd/runtime/qa-77aa.log"}))
    (runtime / "qa-77aa.log").write_text("compiling…\n")
    append(runtime / "progress" / "r1.jsonl",
           {"kind": "entry", "timestamp": now - 5, "message": "tests written", "percent": 70})
    with (runtime / "progress" / "r1.jsonl").open("a") as handle:
        handle.write("{torn\n")
        handle.write('{"kind": "snapshot", "timestamp": 1, "files_changed": 3}\n')
    beats = runtime / "heartbeats"
    beats.mkdir(parents=True, exist_ok=True)
    (beats / "qa-77aa.json").write_text(json.dumps(
        {"timestamp": now - 90, "status": "working", "phase": "gates", "message": EVIL}))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        shown = await _select(pilot, app, "r1", "70% · tests written")
        assert "Last heartbeat" in shown and "stale" in shown and "phase gates" in shown
        assert_text_only(shown, "the Summary tab")
        await wait_for(pilot, lambda: "compiling" in plain(app.query_one("#detail-log")))


async def test_the_log_tab_never_shows_another_tasks_log(project: Path) -> None:
    runtime = project / ".sdd" / "runtime"
    append(runtime / "tasks.jsonl",
           task_record("l1", "failed", title="Ran", metadata={"log": ".sdd/runtime/s1.log"}),
           task_record("l2", "open", title="Never ran"))
    (runtime / "s1.log").write_text("output of l1\n")
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await _select(pilot, app, "l1", "Ran")
        log = app.query_one("#detail-log")
        await wait_for(pilot, lambda: "output of l1" in plain(log))
        await _select(pilot, app, "l2", "Never ran")
        await wait_for(pilot, lambda: "No agent log for this task" in plain(log))
