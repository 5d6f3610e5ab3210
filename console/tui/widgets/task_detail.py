"""The selected task's detail: tabs for gates, chain, reflections, review and the agent log.

Everything but the log comes from the in-memory State (no file I/O on the event
loop); the log is tailed by a thread worker and capped.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, TabbedContent, TabPane

from console.sdd.state import State
from console.tui import detail_render as view

TABS = (("gates", "Gates"), ("chain", "Chain"), ("reflections", "Reflections"),
        ("review", "Review"), ("log", "Log"))


class TaskDetail(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.task_id: str | None = None

    def compose(self) -> ComposeResult:
        with TabbedContent(id="detail-tabs"):
            for key, title in TABS:
                with TabPane(title, id=f"tab-{key}"), VerticalScroll():
                    yield Static(Text("Select a task.", style="italic"), id=f"detail-{key}")

    def show(self, state: State, task_id: str | None) -> None:
        """Redraw every tab but the log from the State (the caller holds its lock)."""
        self.task_id = task_id
        task = state.tasks.get(task_id) if task_id else None
        if task is None:
            for key, _ in TABS[:-1]:
                self.query_one(f"#detail-{key}", Static).update(Text("Select a task.",
                                                                     style="italic"))
            return
        self.query_one("#detail-gates", Static).update(view.gates_view(state, task.id))
        self.query_one("#detail-chain", Static).update(view.chain_view(state, task))
        self.query_one("#detail-reflections", Static).update(
            view.reflections_view(list(state.reflections.get(task.id, []))))
        self.query_one("#detail-review", Static).update(
            view.review_view(list(state.reviews.get(task.id, []))))

    def show_log(self, text: str) -> None:
        self.query_one("#detail-log", Static).update(Text(text))
