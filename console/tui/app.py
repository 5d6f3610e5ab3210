"""The console app: a live, keyed task table over a project's `.sdd/`.

Data path (DESIGN §1): the watcher thread reads files into the State and posts
`StateChanged` with the delta; the app routes it to the screens (the main screen owns
the table, header and detail; see screens/main.py). Nothing on the event loop reads a
file. The app keeps the source, the engine, the operator actions' workers and the
notifications.
"""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from textual.app import App
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel

from console.engine.lifecycle import Stopper
from console.model import TaskState
from console.sdd.sanitize import display_text
from console.sdd.source import LocalSource
from console.sdd.source_protocol import Source
from console.sdd.state import Delta
from console.sdd.task_live import TaskLive
from console.tui import settings
from console.tui.actions import OperatorActions
from console.tui.engine_host import SUPERVISE_EVERY_S, EngineHost
from console.tui.history import HISTORY, Session
from console.tui.keys import APP_BINDINGS
from console.tui.messages import (
    EngineAlert,
    EngineStatus,
    Noted,
    ShowTask,
    SourceError,
    StateChanged,
)
from console.tui.screens.built_view import BuiltView
from console.tui.screens.main import MainScreen
from console.tui.styles import stylesheet
from console.tui.terminal import Terminal
from console.tui.trace import Trace
from console.tui.trusting import TrustActions
from console.tui.updates import AlertWatch, header_of, rows_for
from console.tui.views import ScreenActions, empty_text

if TYPE_CHECKING:
    from textual.command import Provider

    from console.engine.engine import Engine

P = ParamSpec("P")
R = TypeVar("R")

FIRST_PAINT_FALLBACK_S = 1.0  # the footer comes in by then even if no data has
#: the selected task's progress, heartbeat and log are read again this often (seconds)
#: while its agent works
LIVE_EVERY_S = 2
FOLLOWED = frozenset({TaskState.CLAIMED, TaskState.IN_PROGRESS})
#: the header's "reading .sdd/" line is brought up to date this often while it reads
READING_EVERY_S = 0.25
NOTE_LIMIT = 1000  # characters of a notification (it may quote a 10,000-character title)


def _while_up(method: Callable[Concatenate[ConsoleApp, P], R]
              ) -> Callable[Concatenate[ConsoleApp, P], R | None]:
    """A handler that can still fire while the app shuts down (a timer, a late message)
    does nothing once it does; while the app runs, a missing widget is a real error."""

    @functools.wraps(method)
    def wrapper(self: ConsoleApp, *args: P.args, **kwargs: P.kwargs) -> R | None:
        if self.shutting_down:
            return None
        try:
            return method(self, *args, **kwargs)
        except (NoMatches, IndexError):
            if self.shutting_down:
                return None
            raise

    return wrapper


def _console_commands() -> type[Provider]:
    """The palette provider, imported when the palette first opens (not at start-up)."""
    from console.tui.commands import ConsoleCommands

    return ConsoleCommands


class ConsoleApp(ScreenActions, TrustActions, OperatorActions, EngineHost, App[int]):
    TITLE = "bernstein-tui"
    # every sheet here, parsed once at start (a screen's own CSS_PATH, or a mode, has
    # Textual parse them all again: 2 of the 5 parses before the first frame)
    CSS_PATH = [stylesheet("base"), stylesheet("main"), stylesheet("screens")]
    BINDINGS = APP_BINDINGS
    COMMANDS = App.COMMANDS | {_console_commands}

    def __init__(self, root: Path, *, read_only: bool = False, engine: bool = False,
                 demo: bool = False, clock: Callable[[], float] = time.time,
                 label: str | None = None, source: Source | None = None,
                 control: Callable[[], object] | None = None,
                 can_detach: bool = False) -> None:
        super().__init__()
        self._init_engine_host()
        self.can_detach = can_detach  # the CLI keeps the engine running headless
        self.demo = demo
        self.label = label  # shown instead of the project's path
        self.clock = clock
        # a local project's .sdd/, or what `--server` hands in (a task server's)
        self.source: Source = source if source is not None else LocalSource(root)
        self.local = self.source.root is not None  # trust, an engine and worktrees are here
        self.project_root: Path = self.source.root or root  # used only where self.local
        self.control_factory = control
        self.read_only = read_only
        self.history = Session()  # what this console said and did, for the history
        self.want_engine = engine and not read_only
        self.engine: Engine | None = None  # started in a thread; imported lazily
        self.counts: dict[str, int] = {}
        self.problem_count = 0
        self.loaded = False  # no "could not be read" toasts for what the first load finds
        self._first_painted = False
        self._events_seen = 0  # watcher thread only
        self._events_loaded = False  # watcher thread only: no toasts for past engine events
        self._alerts = AlertWatch()  # watcher thread only
        self.trace = Trace.from_env()
        self._terminal = Terminal()  # its modes now, before the app changes them
        self._stopper: Stopper | None = None
        self.bell_on = settings.bell_enabled()
        self._theme_ready = False
        saved = settings.load_theme()
        if saved and saved in self.available_themes:
            self.theme = saved
        self._theme_ready = True
        where = (self.label or self.source.describe()) + (
            "  [read-only]" if self.read_only else "")
        if self.demo:
            where = "DEMO (scripted demo agent, no API keys) · " + where
        # an empty project says so on its first frame (the load confirms it)
        first_text = (empty_text(self.project_root, self.source.exists)
                      if isinstance(self.source, LocalSource) and self.source.has_no_tasks()
                      else "Reading .sdd/ …")
        self.main = MainScreen(self.source, where, read_only=self.read_only, clock=self.clock,
                               engine_line="engine: off (watching only)"
                               if not self.want_engine else "engine: starting …",
                               first_text=first_text)

    def get_default_screen(self) -> MainScreen:
        return self.main

    def on_main_screen_ready(self) -> None:
        """The main screen is up: the source's rows have somewhere to go."""
        self.set_timer(FIRST_PAINT_FALLBACK_S, self._after_first_paint)  # if nothing comes
        self.set_interval(LIVE_EVERY_S, self._follow_live)
        self._reading_timer = self.set_interval(READING_EVERY_S, self._show_reading)
        self.source.start(self._from_watcher, on_error=self._error_from_watcher)
        if self.want_engine:
            self.run_worker(self._start_engine, thread=True, exit_on_error=False,
                            name="start-engine")
        if self.local:
            self.set_interval(SUPERVISE_EVERY_S, self._supervise_in_thread)
        # SIGHUP or SIGTERM, or a terminal that hangs up: stop the engine's agents, then
        # exit — within seconds even if the event loop is stuck (the Stopper's watchdog)
        if self._stopper is not None:
            return
        self._stopper = stopper = Stopper(self._stop_engine, lambda code: self.call_from_thread(
            self.exit, return_code=code), restore=self._terminal.restore)
        stopper.install()
        if not self.is_headless:
            self._terminal.watch_hangup(lambda: stopper.request(128 + signal.SIGHUP))

    def on_unmount(self) -> None:
        self._terminal.stop_watching()
        if self._stopper is not None:
            self._stopper.uninstall()
        self.source.stop()
        self.trace.close()
        self._stop_engine()  # kept running when the operator detached

    def watch_theme(self, theme: str) -> None:
        if self._theme_ready:
            self.run_worker(lambda: settings.save_theme(theme), thread=True,
                            group="settings", exit_on_error=False)

    def _read_ladder(self) -> None:
        """bernstein.yaml's ladders, for escalate's top-tier check (a file: read in a
        thread; a broken one keeps the defaults, the engine says why)."""
        from console.engine.cascade import project_ladders
        from console.sdd.project_config import ConfigError

        try:
            self.main.ladders = project_ladders(self.project_root)
        except (ValueError, TypeError, ConfigError, OSError):
            return

    # -- called in the watcher thread: only compute and post -------------------

    def _from_watcher(self, delta: Delta) -> None:
        loaded = self.source.loaded.is_set()
        with self.source.lock:
            state = self.source.state
            rows = rows_for(state, delta)
            header = header_of(state)
            events = state.engine_events_since(self._events_seen)
            self._events_seen = state.engine_event_total
            alerts = self._alerts.scan(state, delta, announce=self._events_loaded)
        sections = set(delta.sections)
        if delta.upserts or delta.touched:
            sections.add("tasks")
        self.post_message(StateChanged(rows, sections, header, self.source.exists, loaded,
                                       events if self._events_loaded else [], alerts))
        self._events_loaded = loaded

    def _error_from_watcher(self, text: str) -> None:
        self.post_message(SourceError(text))

    # -- handlers on the event loop --------------------------------------------

    @property
    def shutting_down(self) -> bool:
        """The app is stopping (or a test's teardown is): the main screen may be gone."""
        return not self.is_running or not self.main.is_attached

    @property
    def selected(self) -> str | None:
        """The task selected on the main screen."""
        return self.main.selected

    @_while_up
    def on_state_changed(self, message: StateChanged) -> None:
        empty = (empty_text(self.project_root, message.exists) if self.local
                 else f"No tasks on {display_text(self.source.describe())} yet.")
        if self.main.apply(message, empty, self.source.health_line()):
            self.call_after_refresh(self._after_first_paint)  # something to read is up
        if self.trace.on and message.rows:
            self.call_after_refresh(self.trace.mark, "rows",
                                    [k for k, v in message.rows.items() if v is not None],
                                    self.main.table.row_count)
        self.counts = message.header.counts
        if self.loaded and message.header.problems > self.problem_count:
            new = message.header.problems - self.problem_count
            self.notify(f"{new} record{'s' if new != 1 else ''} could not be read (p to list)",
                        severity="warning", timeout=4)
        self.problem_count = message.header.problems
        self.loaded = message.loaded
        for event in message.events:  # errors only: escalations are in the Chain tab
            if event.level == "error":
                self.notify(event.message, severity="error", timeout=8, markup=False)
        for alert in message.alerts:
            self.notify(alert.text, severity=alert.severity, timeout=8, markup=False)
        if any(a.severity == "error" for a in message.alerts) and self.bell_on:
            self.bell()
        # a screen that shows State says which sections it follows
        screen = self.screen
        if isinstance(screen, BuiltView) and message.sections & screen.SECTIONS:
            screen.refresh_rows()  # built in a worker, shown when the screen is up

    async def _after_first_paint(self) -> None:
        """Once the first rows (or the empty screen) are on screen: a long load may go
        on, and the footer comes in."""
        if self.shutting_down or self._first_painted:
            return
        self._first_painted = True
        self.source.shown.set()
        # (imports the engine's cascade and PyYAML: not while the first frame is drawn)
        self.run_worker(self._read_ladder, thread=True, exit_on_error=False, name="ladder")
        await self.main.add_footer()

    def on_show_task(self, message: ShowTask) -> None:
        """Back to the main screen, on the task (a filter hiding it is cleared)."""
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        if message.task_id in self.main.table.rows:
            self.main.go_to_task(message.task_id)
        else:
            self.notify(f"task {message.task_id} is not in the task table (archived?)",
                        severity="warning", markup=False)

    # -- the selected task's progress, heartbeat and log --------------------------------

    @_while_up
    def on_main_screen_selected(self, message: MainScreen.Selected) -> None:
        self._refresh_live()

    @_while_up
    def _show_reading(self) -> None:
        """While the first full read runs: how far it is (two ints, no file read here)."""
        progress = self.source.load_progress()
        self.main.show_reading(progress)
        if progress is None and self.source.loaded.is_set():
            self._reading_timer.stop()

    @_while_up
    def _follow_live(self) -> None:
        """Every LIVE_EVERY_S: the selected task's live figures again, while its agent
        works."""
        if self.selected is None:
            return
        with self.source.lock:
            task = self.source.state.tasks.get(self.selected)
        if task is not None and task.state in FOLLOWED:  # its agent is at work
            self._refresh_live()

    @_while_up
    def _refresh_live(self) -> None:
        """The selected task's progress, last heartbeat and agent log, read by a thread
        worker (files for a local project, `GET /dashboard/tasks/{id}` for a server)."""
        task_id = self.selected
        if task_id is None:
            return
        self.run_worker(lambda: self._read_live(task_id), thread=True, group="live",
                        name="reading the task's log", exclusive=True, exit_on_error=False)

    def _read_live(self, task_id: str) -> None:
        live = self.source.task_live(task_id)
        self.call_from_thread(self._show_live, task_id, live)

    @_while_up
    def _show_live(self, task_id: str, live: TaskLive) -> None:
        if task_id != self.selected:
            return  # the operator moved on while it was read
        self.main.show_live(task_id, live)

    @_while_up
    def on_engine_alert(self, message: EngineAlert) -> None:
        self.main.show_alert(message.text)
        if message.text:
            self.notify(message.text, title="engine stopped dispatching", severity="error",
                        markup=False)
        else:
            self.notify("writes to .sdd/ work again; the engine dispatches again",
                        markup=False)

    @_while_up
    def _supervise_in_thread(self) -> None:
        if self.engine is None:
            self.run_worker(self._supervise, thread=True, group="supervise", exclusive=True,
                            exit_on_error=False, name="watching for an engine")

    @_while_up
    def on_engine_status(self, message: EngineStatus) -> None:
        # figures in engine_status.json are another process's unless this console's
        # engine runs
        self.main.show_engine(message.text, message.untrusted, own=message.running,
                              status_live=message.status_live)

    def on_source_error(self, message: SourceError) -> None:
        self.notify(message.text, severity="error", timeout=8)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification of the console (screens' too: theirs come here): data
        made display text, never markup — a `[/]` in a server's error or a task id is
        shown as written, an escape sequence as `\\x1b`. Each is also posted as `Noted`."""
        text = display_text(message, multiline=True, limit=NOTE_LIMIT)
        super().notify(text, title=display_text(title, limit=NOTE_LIMIT), severity=severity,
                       timeout=timeout, markup=False)
        self.history.note(text, severity)
        self.post_message(Noted(text, severity))
        if self.screen_stack and isinstance(self.screen, BuiltView) and \
                HISTORY in self.screen.SECTIONS:
            self.screen.refresh_rows()
