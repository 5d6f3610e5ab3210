"""#19.7 Ask only what can be done: an action that would be refused is refused at once,
in one line, before any confirm opens; an approval shows which step it is on while the
sandbox, the tests and the merge run."""

from __future__ import annotations

from pathlib import Path

from console.action_rules import cancel_refusal, escalate_refusal, retry_refusal
from console.model import Task
from console.tui.app import ConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.test_tui import Notes, plain, wait_for


def _task(status: str, **fields: object) -> Task:
    from console.sdd.task_codec import decode_task

    return decode_task(task_record("t", status, **fields))


def test_the_rules_are_the_engines_own_words() -> None:
    assert retry_refusal(_task("failed")) is None
    assert "only a failed task" in (retry_refusal(_task("done")) or "")
    assert "top tier (opus)" in (escalate_refusal(_task("failed", model="opus")) or "")
    assert escalate_refusal(_task("failed", model="opus"), ("haiku", "sonnet", "opus", "o5")) \
        is None  # a longer ladder has a rung above
    assert escalate_refusal(_task("failed", model="haiku")) is None
    assert "can be cancelled" in (cancel_refusal(_task("failed")) or "")
    assert cancel_refusal(_task("open")) is None


async def test_refusals_come_before_any_question(project: Path) -> None:
    append(project / ".sdd/runtime/tasks.jsonl",
           task_record("top", "failed", title="On the top tier", model="opus"),
           task_record("gone", "failed", title="Failed already"),
           task_record("fine", "done", title="Done"))
    app = ConsoleApp(project)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: len(table.task_ids) == 3)
        for task_id, key, said in (("top", "e", "already runs on the top tier (opus)"),
                                   ("gone", "x", "only open, claimed, running"),
                                   ("fine", "r", "only a failed task can be retried")):
            table.move_to(task_id)
            await wait_for(pilot, lambda t=task_id: app.selected == t)
            await pilot.press(key)
            await wait_for(pilot, lambda s=said: notes.said(s))
            assert not isinstance(app.screen, ConfirmScreen), (task_id, key)
        table.move_to("gone")  # what can be done still asks first
        await wait_for(pilot, lambda: app.selected == "gone")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))


async def test_an_approval_shows_its_step_and_a_decided_one_is_refused_at_once(
        tmp_path: Path) -> None:
    from console.engine.evolution import Proposal, record_proposal, unified_diff
    from console.sdd.paths import SddPaths
    from console.tui.screens.proposals import ProposalsScreen
    from tests.test_evolution import CONFIG, make_project

    root = make_project(tmp_path)
    (root / "tests" / "test_slow.py").write_text(  # the tests step lasts a while
        "import time\n\n\ndef test_slow():\n    time.sleep(3)\n")
    from tests.engine_kit import git
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "slow")
    diff = unified_diff("bernstein.yaml", CONFIG, CONFIG + "# approved\n")
    record_proposal(SddPaths(root), Proposal("EVO-step", "Step by step", "policy_update",
                                             "because", 0.8, ("bernstein.yaml",), diff),
                    "human_review_4h", "L2 — review")
    app = ConsoleApp(root)
    notes = Notes()
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        await wait_for(pilot, lambda: app.loaded)
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ProposalsScreen))
        await wait_for(pilot, lambda: app.screen.selected == "EVO-step")
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        line = app.screen.query_one("#approval-line")
        await wait_for(pilot, lambda: "running the tests" in plain(line), timeout=60)
        assert line.display and "approving EVO-step" in plain(line)
        await wait_for(pilot, lambda: notes.said("merged into main"), timeout=120)
        await wait_for(pilot, lambda: not line.display, timeout=10)
        await pilot.press("a")  # decided now: refused before any question
        await wait_for(pilot, lambda: notes.said("proposal EVO-step is already decided"))
        assert isinstance(app.screen, ProposalsScreen)
    assert not (root / ".sdd/runtime/approvals/EVO-step.json").exists()
