"""The console under Pilot: live rows, resets, the empty screen, the problems screen."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

from textual.message import Message

from console.sdd.fileio import append_jsonl
from console.tui.app import ConsoleApp
from console.tui.messages import Noted
from console.tui.widgets.status_bar import StatusBar
from console.tui.widgets.task_detail import TaskDetail
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record


async def wait_for(pilot, condition, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def plain(widget) -> str:
    """What a Static shows, as plain text (its content may be any Rich renderable)."""
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


class Notes:
    """The console's notifications as it posts them (`Noted`), seen through run_test's
    public message hook: `app.run_test(..., message_hook=notes)`."""

    def __init__(self) -> None:
        self.seen: list[Noted] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Noted):
            self.seen.append(message)

    def said(self, text: str) -> bool:
        return any(text in note.text for note in self.seen)


def cell(table: TaskTable, row: str, column: str) -> str:
    return table.cell(row, column)


async def test_a_record_appended_from_another_thread_appears(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("t1", "open", title="First"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["t1"])
        writer = threading.Thread(target=append_jsonl, args=(
            tasks, [task_record("t2", "claimed", title="Second"),
                    task_record("t1", "failed", title="First")]))
        writer.start()
        writer.join()
        await wait_for(pilot, lambda: "t2" in table.task_ids
                       and cell(table, "t1", "state") == "✗ failed")
        assert cell(table, "t2", "state") == "◔ claimed"
        assert cell(table, "t2", "title") == "Second"
        assert table.row_count == 2
        status = str(app.query_one(StatusBar).render())
        assert "2 tasks" in status and "◔ claimed 1" in status and "✗ failed 1" in status


async def test_truncated_and_replaced_files_keep_the_console_running(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("a"), task_record("b"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: set(table.task_ids) == {"a", "b"})
        tasks.write_text("")
        await wait_for(pilot, lambda: table.task_ids == [])
        replacement = project / "next.jsonl"
        replacement.write_text(json.dumps(task_record("c", "done")) + "\n{broken")
        os.replace(replacement, tasks)
        await wait_for(pilot, lambda: table.task_ids == ["c"])
        await wait_for(pilot, lambda: app.problem_count == 0)  # {broken is a held half line
        append(tasks, "\n")
        await wait_for(pilot, lambda: app.problem_count == 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProblemsScreen")
        problems = app.screen.query_one("#problems-table")
        assert problems.row_count == 1
        assert str(problems.get_cell("0", "file")) == ".sdd/runtime/tasks.jsonl"
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "ProblemsScreen"


async def test_missing_sdd_shows_how_to_start_then_fills_in(tmp_path: Path) -> None:
    app = ConsoleApp(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        empty = app.query_one("#empty")
        await wait_for(pilot, lambda: "No .sdd/ directory" in str(empty.render()))
        assert "bernstein-tui -C" in str(empty.render()) and "init" in str(empty.render())
        assert not app.query_one(TaskTable).display
        append(tmp_path / ".sdd" / "runtime" / "tasks.jsonl", task_record("n1"))
        await wait_for(pilot, lambda: app.query_one(TaskTable).task_ids == ["n1"])
        assert app.query_one(TaskTable).display and not empty.display


async def test_titles_are_shown_as_written_never_as_markup(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("m1", "open", title="Route [/api] paths [bold]x"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["m1"])
        assert cell(table, "m1", "title") == "Route [/api] paths [bold]x"


async def test_an_empty_sdd_says_how_to_give_the_engine_work(project: Path) -> None:
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        empty = app.query_one("#empty")
        await wait_for(pilot, lambda: "No tasks yet" in str(empty.render()))
        assert "backlog/open" in str(empty.render())
        # the footer comes in after that first paint, with its keys, though no focus
        # or binding changed since
        from textual.widgets import Footer

        await wait_for(pilot, lambda: len(app.screen.query(Footer)) == 1)
        footer = app.screen.query_one(Footer)
        await wait_for(pilot, lambda: len(footer.children) > 0)
        keys = {getattr(key, "key", None) for key in footer.children}
        assert {"question_mark", "q"} <= keys and footer.region.y == 29


async def test_the_console_runs_its_engine_and_shows_the_work(tmp_path: Path,
                                                              monkeypatch) -> None:
    from tests.engine_kit import make_repo, ticket

    root = make_repo(tmp_path)
    monkeypatch.setenv("SPEC_AGENT_LOG", str(tmp_path / "agent.log"))
    ticket(root, "ok", id="OK", title="Writes a file", description="write out/ok.txt yes")
    ticket(root, "bad", id="BAD", title="Fails", description="exit 5")
    app = ConsoleApp(root, engine=True)
    notes = Notes()
    async with app.run_test(size=(120, 30), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        status = app.query_one("#status")
        await wait_for(pilot, lambda: "workers busy" in str(status.render()), timeout=20)
        await wait_for(pilot, lambda: set(table.task_ids) == {"OK", "BAD"}
                       and cell(table, "OK", "state") == "✓ done"
                       and cell(table, "BAD", "state") == "✗ failed", timeout=30)
        await wait_for(pilot, lambda: notes.said("BAD failed: agent exited with code 5"),
                       timeout=10)
        assert app.engine is not None and app.engine.lock.held
    assert app.engine.lock.held is False  # quitting stopped the engine and let go
    from tests.engine_kit import git

    assert git(root, "show", "main:out/ok.txt") == "yes\n"
    assert (root / "out" / "ok.txt").read_text() == "yes\n"  # the checkout of main, merged


async def test_a_second_console_only_watches_and_says_who_owns_it(tmp_path: Path) -> None:
    from console.engine.lock import EngineLock
    from console.sdd.paths import SddPaths
    from tests.engine_kit import make_repo

    root = make_repo(tmp_path)
    with EngineLock(SddPaths(root)):
        app = ConsoleApp(root, engine=True)
        async with app.run_test(size=(120, 30)) as pilot:
            status = app.query_one("#status")
            await wait_for(pilot, lambda: "not started by this console" in str(status.render()))
            assert f"pid {os.getpid()}" in str(status.render())
            assert app.engine is None


async def test_detail_tabs_and_actions_from_the_keyboard(project: Path) -> None:
    from textual.widgets import Static

    from console.tui.screens.confirm import ConfirmScreen

    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl", task_record("f1", "failed", title="Broke"),
           task_record("o1", "open", title="Waiting"))
    append(sdd / "metrics" / "reflections.jsonl", {
        "task_id": "f1", "iteration": 1, "model": "haiku", "gate": "lint",
        "error_pattern": "a.py:1 F401", "source": "rules", "reused": False,
        "diagnosis": {"what_failed": "lint", "why": "unused import", "try_next": "remove it",
                      "focus": "a.py:1"}, "files_changed": ["a.py"]})
    app = ConsoleApp(project)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: set(table.task_ids) == {"f1", "o1"})
        await wait_for(pilot, lambda: app.query_one(TaskDetail).active)  # built after the rows
        table.move_to("f1")
        await wait_for(pilot, lambda: app.selected == "f1")
        await wait_for(pilot, lambda: "unused import" in plain(
            app.query_one("#detail-reflections", Static)))
        await pilot.press("r")
        await wait_for(pilot, lambda: cell(table, "f1", "state") == "○ open")
        table.move_to("o1")
        await wait_for(pilot, lambda: app.selected == "o1")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await pilot.pause(0.3)
        assert cell(table, "o1", "state") == "○ open"  # said no: nothing happened
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: cell(table, "o1", "state") == "⊘ cancelled")
        await pilot.press("r")  # a cancelled task cannot be retried: the reason is shown
        await wait_for(pilot, lambda: notes.said("terminal"))


async def test_read_only_refuses_every_action(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("f1", "failed"))
    app = ConsoleApp(project, read_only=True)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["f1"])
        await pilot.press("r")
        await wait_for(pilot, lambda: notes.said("read-only"))
        await pilot.pause(0.3)
        assert cell(table, "f1", "state") == "✗ failed"


async def test_a_proposal_is_approved_from_the_console(tmp_path: Path) -> None:
    from console.engine.evolution import Proposal, record_proposal, unified_diff
    from console.sdd.paths import SddPaths
    from console.tui.screens.confirm import ConfirmScreen
    from console.tui.screens.proposals import ProposalsScreen
    from tests.engine_kit import git
    from tests.test_evolution import CONFIG, make_project

    root = make_project(tmp_path)
    diff = unified_diff("bernstein.yaml", CONFIG, CONFIG + "# approved from the console\n")
    record_proposal(SddPaths(root), Proposal("EVO-ui", "From the console", "policy_update",
                                             "because", 0.8, ("bernstein.yaml",), diff),
                    "human_review_4h", "L2 — review")
    app = ConsoleApp(root)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        await wait_for(pilot, lambda: app.loaded)
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ProposalsScreen))
        def body() -> str:  # the screen may still be composing on the first looks
            try:
                return plain(app.screen.query_one("#proposal-body"))
            except Exception:
                return ""

        await wait_for(pilot, lambda: "approved from the console" in body())
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: notes.said("merged into main"), timeout=60)
    assert "# approved from the console" in git(root, "show", "main:bernstein.yaml")


async def test_the_benchmark_trace_marks_rows_after_they_are_painted(project: Path,
                                                                    tmp_path: Path,
                                                                    monkeypatch) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("BERNSTEIN_TUI_TRACE", str(trace))
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("t1", "open"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.query_one(TaskTable).row_count == 1)
        append(tasks, task_record("t2", "open"))
        await wait_for(pilot, lambda: trace.exists() and '"t2"' in trace.read_text())
    marks = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [m["ids"] for m in marks] == [["t1"], ["t2"]]
    assert [m["rows"] for m in marks] == [1, 2]
    assert marks[0]["t"] <= marks[1]["t"]


async def test_header_keeps_every_state_count_whole_at_120_columns(project: Path) -> None:
    """Every state at once: the counts wrap onto a third line, part by part; the engine
    and cost line stays in sight and no count is cut in two."""
    from console.model import TaskState, state_label

    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i}", state.value) for i, state in enumerate(TaskState)))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == len(TaskState))
        await wait_for(pilot, app.source.shown.is_set)  # a long load would go on now
        await pilot.pause(0.1)
        bar = app.query_one(StatusBar)
        lines = str(bar.render()).splitlines()
        assert len(lines) == bar.size.height >= 3
        assert all(len(line) <= bar.content_region.width for line in lines)
        assert "engine: off (watching only)" in lines[0] and "cost $" in lines[0]
        for state in TaskState:
            assert any(f"{state_label(state.value)} 1" in line for line in lines), state
        assert table.region.y == bar.size.height + 1  # the view line, then the table
