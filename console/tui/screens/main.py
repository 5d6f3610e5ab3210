"""The main screen: the header, the task table (or what an empty project shows), the
SLA strip and the selected task's detail. It owns their layout (`main.tcss`), the
selection, the filter and the task keys; the app hands it each batch of rows and the
engine's news, and reads agent logs for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static, Tabs

from console.sdd.kinds import DETAIL_SECTIONS
from console.tui.keys import MAIN_BINDINGS, MAIN_KEYS, SCREEN_GROUPS
from console.tui.screens.narrow import FitsNarrow
from console.tui.task_actions import TaskActions
from console.tui.views import FilterActions
from console.tui.widgets.lines import Lines
from console.tui.widgets.sla_strip import SlaStrip
from console.tui.widgets.status_bar import StatusBar
from console.tui.widgets.task_detail import TaskDetail
from console.tui.widgets.task_table import TaskTable

if TYPE_CHECKING:
    from collections.abc import Callable

    from console.sdd.source_protocol import Source
    from console.sdd.task_live import TaskLive
    from console.tui.messages import StateChanged

#: sections whose records the detail tabs show
#: the main screen's own actions: they need a table to act on
TABLE_ACTIONS = frozenset(action.split("(")[0] for group, _key, action, *_ in MAIN_KEYS
                          if group in SCREEN_GROUPS and not action.startswith("app."))
#: widgets shown only once there are rows
TABLE_WIDGETS = ("#view-line", "#tasks", "#sla-strip", "#detail")


class MainScreen(FitsNarrow, FilterActions, TaskActions, Screen[None]):
    BINDINGS = MAIN_BINDINGS
    AUTO_FOCUS = "TaskTable"  # never the hidden filter box

    class Selected(Message):
        """The task whose detail is shown changed (None: no task): its log is wanted."""

        def __init__(self, task_id: str | None) -> None:
            super().__init__()
            self.task_id = task_id

    class Ready(Message):
        """The screen's widgets are mounted: rows may come."""

    def __init__(self, source: Source, where: str, *, read_only: bool,
                 clock: Callable[[], float], engine_line: str,
                 first_text: str = "Reading .sdd/ …") -> None:
        super().__init__()
        self.first_text = first_text  # what the first frame says, before the load does
        self.source = source  # read under its lock: the watcher thread writes the State
        self.where = where
        self.read_only = read_only
        self.clock = clock
        self.engine_line = engine_line
        self.selected: str | None = None
        self.filter_text = ""
        self.footed = False
        self.opened = False  # the selected task opened: its tabs at full height
        self.has_rows = False  # a table to act on (not the empty project's text)

    def compose(self) -> ComposeResult:
        yield StatusBar(self.where, id="status")
        with Vertical(id="body"):
            yield Static(self.first_text, id="empty", markup=False)
            yield self.filter_box()
            yield Lines("", id="view-line", markup=False)
            yield TaskTable(clock=self.clock, id="tasks")
            yield SlaStrip("", id="sla-strip")
            yield TaskDetail(id="detail")
        # the Footer (a widget per key, ~50 ms to lay out) is mounted right after the
        # first paint: see add_footer

    def on_mount(self) -> None:
        for widget in TABLE_WIDGETS:
            self.query_one(widget).display = False
        self.query_one(StatusBar).show(engine_line=self.engine_line)
        self.set_interval(1.0, self.show_sla)
        self.post_message(self.Ready())

    # -- what the app hands over -------------------------------------------------------

    def apply(self, message: StateChanged, empty_text: str, engine_line: str | None) -> bool:
        """A batch of rows and the header's figures; True once something worth reading
        is on screen (rows, or the empty project's text)."""
        table = self.query_one(TaskTable)
        empty = self.query_one("#empty", Static)
        table.apply(message.rows)
        show_table = message.exists and bool(table.rows)
        if not show_table and (message.loaded or not message.exists):
            empty.update(empty_text)
        empty.display = not show_table
        if show_table != self.has_rows:
            self.has_rows = show_table
            self.refresh_bindings()  # the task keys come (or go) with the table
        if show_table and not table.display and not self.opened:
            for widget in ("#view-line", "#tasks"):
                self.query_one(widget).display = True
            # the detail pane (tabs, five panes) is laid out after the rows are on screen
            self.call_after_refresh(self._show_detail)
        elif not show_table and table.display:
            for widget in ("#view-line", "#tasks", "#detail"):
                self.query_one(widget).display = False
        if self.selected in message.rows or message.sections & DETAIL_SECTIONS:
            self.select(self.selected)
        self.query_one(StatusBar).show(message.header, engine_line=engine_line)
        self.show_sla()
        self.show_view_line()
        return show_table or message.loaded or not message.exists

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The task and view keys only while there is a table for them to act on: the
        footer of an empty project lists the screens, help and quit."""
        return self.has_rows or action not in TABLE_ACTIONS

    def fit_width(self) -> None:
        super().fit_width()
        self.show_view_line()  # its key hint is shorter when narrow

    def show_engine(self, line: str, notice: str = "", *, own: bool = True,
                    status_live: bool = True) -> None:
        self.query_one(StatusBar).show(engine_line=line, notice=notice, own=own,
                                       status_live=status_live)

    def show_reading(self, progress: tuple[int, int] | None) -> None:
        """The first full read's progress in the header (None: done)."""
        self.query_one(StatusBar).show(reading=progress)

    def show_alert(self, text: str) -> None:
        """What stops the engine right now (a full disk), or "" once it is over."""
        self.query_one(StatusBar).show(alert=text)

    async def add_footer(self) -> None:
        if self.footed:
            return
        self.footed = True
        await self.mount(Footer())
        self.fit_width()
        self.refresh_bindings()  # a footer mounted late fills in on the next change only

    @property
    def table(self) -> TaskTable:
        return self.query_one(TaskTable)

    # -- the table, the SLA strip and the selected task's detail ----------------------

    async def _show_detail(self) -> None:
        table = self.query_one(TaskTable)
        if table.display:
            detail = self.query_one(TaskDetail)
            detail.display = True
            await detail.activate()
            # once the panes exist, whichever task is selected by then: a Highlighted
            # handled meanwhile must not be undone by the selection seen here
            self.call_after_refresh(lambda: self.select(self.selected))
            if self.focused is None:
                table.focus()

    def show_sla(self) -> None:
        table = self.query_one(TaskTable)
        strip = self.query_one(SlaStrip)
        strip.show((table.rows[i] for i in table.deadlined), self.clock())
        if self.opened:
            strip.display = False

    # -- a task opened: its tabs at full height ---------------------------------------

    def action_open_task(self) -> None:
        """Enter: the selected task's tabs take the whole body (enter or escape: back)."""
        if self.opened:
            self._close_task()
            return
        detail = self.query_one(TaskDetail)
        if self.selected is None or not detail.active:
            self.notify("select a task first", severity="warning")
            return
        self.opened = True
        for widget in ("#view-line", "#tasks", "#sla-strip"):
            self.query_one(widget).display = False
        detail.query_one(Tabs).focus()

    def _close_task(self) -> None:
        self.opened = False
        table = self.query_one(TaskTable)
        for widget in ("#view-line", "#tasks"):
            self.query_one(widget).display = bool(table.rows)
        self.show_sla()
        table.focus()

    def action_back(self) -> None:
        """Escape: out of an opened task, else the filter cleared."""
        if self.opened:
            self._close_task()
        else:
            self.action_clear_filter()

    def on_task_table_highlighted(self, event: TaskTable.Highlighted) -> None:
        self.select(event.task_id)

    def on_task_table_view_changed(self, event: TaskTable.ViewChanged) -> None:
        self.show_view_line()

    def select(self, task_id: str | None) -> None:
        self.selected = task_id
        with self.source.lock:
            self.query_one(TaskDetail).show(self.source.state, task_id)
        self.post_message(self.Selected(task_id))

    def show_live(self, task_id: str, live: TaskLive) -> None:
        """The task's progress, last heartbeat and agent log, read by the app's worker."""
        with self.source.lock:
            self.query_one(TaskDetail).show_live(self.source.state, task_id, live)
