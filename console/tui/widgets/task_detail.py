"""The selected task's detail: tabs for its summary, gates, chain, reflections, review and
the agent log.

Everything but the log comes from the in-memory State (no file I/O on the event
loop); the log is tailed by a thread worker and capped, and keeps SGR colours only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from console.sdd.paths import Kind
from console.sdd.sanitize import sgr_only

if TYPE_CHECKING:
    from rich.console import RenderableType

    from console.sdd.state import State
    from console.sdd.task_live import TaskLive

#: tabs for a JSONL kind kept per task (`kinds.per_task_list`): (key, title, kind, render
#: the task's records). A new kind's tab is one line here (CONTRIBUTING.md).
RECORD_TABS: tuple[tuple[str, str, Kind, Callable[[list[Any]], RenderableType]], ...] = ()

TABS = (("summary", "Summary"), ("gates", "Gates"), ("chain", "Chain"),
        ("reflections", "Reflections"), ("review", "Review"),
        *((key, title) for key, title, _kind, _render in RECORD_TABS), ("log", "Log"))


class TaskDetail(Vertical):
    """Empty until `activate()`: the tabs are built once the first rows are on screen,
    so they never delay the first paint."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task_id: str | None = None
        self.live: TaskLive | None = None  # of `task_id`, once read
        self.active = False
        self._activating = False

    def compose(self) -> ComposeResult:
        if not self._activating:
            return
        # imported with the tabs, after the first paint, not at start-up
        from textual.widgets import TabbedContent, TabPane

        with TabbedContent(id="detail-tabs"):
            for key, title in TABS:
                with TabPane(title, id=f"tab-{key}"), VerticalScroll():
                    yield Static(Text("Select a task.", style="italic"), id=f"detail-{key}")

    async def activate(self) -> None:
        if self.active or self._activating:
            return
        self._activating = True
        await self.recompose()
        self.active = True  # only now can show() find the panes

    def _put(self, key: str, content: RenderableType) -> None:
        pane = self.query_one_optional(f"#detail-{key}", Static)
        if pane is not None:  # None for the moment the tabs are being built
            pane.update(content)

    def show(self, state: State, task_id: str | None) -> None:
        """Redraw every tab but the log from the State (the caller holds its lock)."""
        changed = task_id != self.task_id
        if changed:
            self.live = None
        self.task_id = task_id
        if not self.active:
            return  # drawn on activation
        if changed:  # never another task's log under this one's name
            self._put("log", Text("Reading the agent log…", style="italic"))
        from console.tui import detail_render as view
        from console.tui.summary_render import summary_view

        task = state.tasks.get(task_id) if task_id else None
        if task is None:
            for key, _ in TABS:
                self._put(key, Text("Select a task.", style="italic"))
            return
        self._put("summary", summary_view(state, task, self.live))
        self._put("gates", view.gates_view(state, task.id))
        self._put("chain", view.chain_view(state, task))
        self._put("reflections", view.reflections_view(list(state.reflections.get(task.id, []))))
        self._put("review", view.review_view(list(state.reviews.get(task.id, []))))
        for key, _title, kind, render in RECORD_TABS:
            self._put(key, render(list(state.per_task.get(kind, {}).get(task.id, []))))

    def show_live(self, state: State, task_id: str, live: TaskLive) -> None:
        """The selected task's progress, heartbeat and log tail, read by a worker."""
        if task_id != self.task_id:
            return
        self.live = live
        self.show(state, task_id)
        if self.active:
            self._put("log", Text.from_ansi(sgr_only(live.log)) if live.log is not None
                      else Text("No agent log for this task (no attempt has started).",
                                style="italic"))
