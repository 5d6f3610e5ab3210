"""Issue #16 part 2, the console: `--server` against a hostile task server stays up
(Pilot, a real server on 127.0.0.1): an event line that never ends resets the stream
and the tasks are read again; markup in a server's error is text, not markup."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.remote import remote_console_parts
from console.remote.client import ServerClient
from console.tui.app import ConsoleApp
from console.tui.widgets.task_table import TaskTable
from tests.security.hostile_server import MARKUP, HostileServer
from tests.test_tui import plain
from tests.test_tui import wait_for as ui_wait


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    server = HostileServer(request.param).start()
    yield server
    server.stop()


def console_on(server: HostileServer, root: Path) -> ConsoleApp:
    source, control = remote_console_parts(ServerClient(server.url, timeout=2), None, False)
    source.poll_s, source.backoff_s = 0.2, 0.05
    return ConsoleApp(root, source=source, control=control)


@pytest.mark.parametrize("hostile", [{"/events": "endless-line"}], indirect=True)
async def test_an_endless_event_line_resets_the_stream_and_the_console_stays_up(
        hostile: HostileServer, tmp_path: Path) -> None:
    app = console_on(hostile, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await ui_wait(pilot, lambda: sorted(table.task_ids) == ["t0", "t1", "t2"], timeout=10)
        await ui_wait(pilot, lambda: hostile.hits.get("/events", 0) >= 3, timeout=20)
        await ui_wait(pilot, lambda: "events down" in plain(app.query_one("#status")),
                      timeout=10)
        await pilot.press("j")
        await pilot.pause()
        assert app.is_running and sorted(table.task_ids) == ["t0", "t1", "t2"]


@pytest.mark.parametrize("hostile", [{"/tasks": "markup", "/tasks/archive": "markup"}],
                         indirect=True)
async def test_markup_in_a_server_error_is_shown_as_text(
        hostile: HostileServer, tmp_path: Path) -> None:
    app = console_on(hostile, tmp_path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ui_wait(pilot, lambda: hostile.hits.get("/tasks", 0) >= 2, timeout=20)
        await ui_wait(pilot, lambda: any(MARKUP in str(toast.render())  # shown as written
                                         for toast in app.screen.query("Toast")))
        await pilot.press("j")
        await pilot.pause()
        assert app.is_running


@pytest.mark.parametrize("hostile", [{"/tasks": "escapes", "/tasks/e1": "escapes"}],
                         indirect=True)
async def test_escapes_and_markup_in_titles_leave_the_console_up(
        hostile: HostileServer, tmp_path: Path) -> None:
    app = console_on(hostile, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await ui_wait(pilot, lambda: len(table.task_ids) == 7, timeout=10)
        for _ in range(7):  # each row selected in turn: its detail drawn
            await pilot.press("j")
            await pilot.pause()
        assert app.is_running
