"""Issue #32 point 8: an SGR parameter of any length cannot blank the Log tab. An agent
writes `ESC [` and 5,000 nines (past Python's 4,300-digit `int()` limit) into its log;
the console's Log tab still shows every line around it, the sequence dropped (its
digits are capped before they are converted), the colours that are fine kept."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.widgets import TabbedContent

from console.sdd.sanitize import sgr_only
from console.tui.app import ConsoleApp
from console.tui.widgets.task_detail import TaskDetail
from console.tui.widgets.task_table import TaskTable
from tests.conftest import append, task_record
from tests.security.display_kit import assert_text_only
from tests.test_tui import plain, wait_for

NINES = "9" * 5000
LOG = ("first line before\n"
       f"\x1b[{NINES}mhuge code\x1b[0m\n"
       f"\x1b[38;5;{NINES}mhuge colour\x1b[0m and \x1b[1;{NINES};31mbold red\x1b[0m\n"
       f"\x1b[38;2;1;2;{'0' * 6000}7mleading zeros\x1b[0m\n"
       "last line after\n")


async def test_a_huge_sgr_parameter_leaves_the_log_tab_whole(project: Path) -> None:
    runtime = project / ".sdd" / "runtime"
    append(runtime / "tasks.jsonl",
           task_record("sgr", "failed", title="Noisy agent",
                       metadata={"log": ".sdd/runtime/noisy.log"}))
    (runtime / "noisy.log").write_text(LOG)
    app = ConsoleApp(project)
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.task_ids == ["sgr"], timeout=20)
        await wait_for(pilot, lambda: app.query_one(TaskDetail).active, timeout=20)
        table.move_to("sgr")
        await wait_for(pilot, lambda: app.selected == "sgr")
        app.query_one("#detail-tabs", TabbedContent).active = "tab-log"
        log = app.query_one("#detail-log")
        await wait_for(pilot, lambda: "last line after" in plain(log), timeout=20)
        shown = plain(log)
        assert app.is_running
        for text in ("first line before", "huge code", "huge colour and bold red",
                     "leading zeros", "last line after"):
            assert text in shown, text
        assert "999" not in shown  # the sequence is dropped, not shown as text
        assert_text_only(shown, "the Log tab")
    # what the pane renders: the fine codes kept, the out-of-range ones dropped
    assert sgr_only(LOG) == ("first line before\nhuge code\x1b[0m\n"
                             "huge colour\x1b[0m and \x1b[1;31mbold red\x1b[0m\n"
                             "\x1b[38;2;1;2;7mleading zeros\x1b[0m\nlast line after\n")


@settings(max_examples=300, deadline=None)
@given(params=st.lists(st.text("0123456789", max_size=8) | st.integers(4000, 6000).map(
    lambda n: "0" * (n % 7) + "9" * n), max_size=6).map(";".join),
       final=st.sampled_from("mHJK"))
def test_any_sgr_parameters_keep_the_text_around_them(params: str, final: str) -> None:
    shown = sgr_only(f"before\x1b[{params}{final}after\n")
    assert shown.startswith("before") and "after\n" in shown
    kept = shown[len("before"):shown.index("after")]
    assert kept == "" or (final == "m" and kept.startswith("\x1b[") and len(kept) < 40)
