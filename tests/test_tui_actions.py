"""Operator actions under Pilot (#18.3): a screen posts an `OperatorRequest`, the app
carries it out in an "actions" worker thread that posts `ActionDone`, and a worker
that fails is said in one sanitised line — never silent, never the end of the app."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.message import Message
from textual.pilot import Pilot

from console.engine.control import local_control
from console.tui.app import ConsoleApp
from console.tui.messages import ActionDone, OperatorRequest
from console.tui.widgets.task_table import TaskTable
from tests.bernstein_server import FakeBernstein
from tests.conftest import append, task_record
from tests.test_tui import Notes, cell, wait_for


class Seen(Notes):
    """Every message of the kinds asked for, and the threads actions ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[OperatorRequest] = []
        self.done: list[ActionDone] = []

    def __call__(self, message: Message) -> None:
        super().__call__(message)
        # a request is seen where it is posted and again where it bubbles to: once here
        if isinstance(message, OperatorRequest) and all(r is not message
                                                        for r in self.requests):
            self.requests.append(message)
        elif isinstance(message, ActionDone):
            self.done.append(message)


async def retry_the_failed_task(pilot: Pilot[int], app: ConsoleApp) -> TaskTable:
    """Once task f1 is listed and selected, press r."""
    table = app.query_one(TaskTable)
    await wait_for(pilot, lambda: table.task_ids == ["f1"])
    await wait_for(pilot, lambda: app.selected == "f1")
    await pilot.press("r")
    return table


async def test_a_key_posts_a_request_and_its_outcome_comes_back(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("f1", "failed"))
    threads: list[str] = []

    def control() -> object:  # the real file-only Control, noting the thread it is had in
        threads.append(threading.current_thread().name)
        return local_control(project)

    app = ConsoleApp(project, control=control)
    seen = Seen()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        table = await retry_the_failed_task(pilot, app)
        await wait_for(pilot, lambda: cell(table, "f1", "state") == "○ open")
        await wait_for(pilot, lambda: bool(seen.done))
    assert [r.name for r in seen.requests] == ["retry"]
    assert [(d.name, d.outcome.ok) for d in seen.done] == [("retry", True)]
    assert seen.said(seen.done[0].outcome.message)
    assert threads and threads[0] != threading.main_thread().name


async def test_a_failed_action_worker_is_one_sanitised_line(project: Path) -> None:
    """A project a Bernstein server runs: the Control cannot be had (OwnedElsewhere is
    raised in the worker); the app says so in one line and keeps running."""
    server = FakeBernstein("tok").start()
    try:
        port = server.url.rsplit(":", 1)[1]
        (project / ".sdd" / "config.yaml").write_text(f"server_port: {port}\n")
        append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("f1", "failed"))
        app = ConsoleApp(project)
        notes = Notes()
        async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
            table = await retry_the_failed_task(pilot, app)
            await wait_for(pilot, lambda: notes.said("retry: "), timeout=20)
            failure = next(n for n in notes.seen if n.text.startswith("retry: "))
            assert failure.severity == "error" and "\n" not in failure.text
            assert f"--server {server.url}" in failure.text
            assert "Traceback" not in failure.text
            await pilot.pause(0.2)
            assert app.is_running and cell(table, "f1", "state") == "✗ failed"
    finally:
        server.stop()


async def test_read_only_refuses_a_request_before_any_worker(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("f1", "failed"))
    app = ConsoleApp(project, read_only=True)
    seen = Seen()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: app.selected == "f1")
        app.main.post_message(OperatorRequest("retry", lambda control: control.retry("f1")))
        await wait_for(pilot, lambda: seen.said("retry refused: the console is read-only"))
        await pilot.pause(0.3)
        assert seen.done == [] and app.query_one(TaskTable).rows["f1"].status == "failed"
