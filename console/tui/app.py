"""The console app: a live, keyed task table over a project's `.sdd/`.

Data path (DESIGN §1): the watcher thread reads files into the State and posts
`StateChanged` with the delta; handlers here only touch widgets. Nothing on the
event loop reads a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from console.engine.errors import EngineError, OwnedElsewhere
from console.sdd.fileio import read_log_tail
from console.sdd.project_config import ConfigError
from console.sdd.source import LocalSource
from console.sdd.state import Delta
from console.tui.messages import EngineStatus, SourceError, StateChanged
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.problems import ProblemsScreen
from console.tui.screens.proposals import ProposalsScreen
from console.tui.styles import stylesheet
from console.tui.trace import Trace
from console.tui.widgets.status_bar import StatusBar
from console.tui.widgets.task_detail import TaskDetail
from console.tui.widgets.task_table import TaskTable

if TYPE_CHECKING:
    from console.engine.engine import Engine

DETAIL_SECTIONS = frozenset({"gates", "chains", "reflections", "reviews"})

def empty_text(root: Path, exists: bool) -> str:
    if exists:
        return (
            f"No tasks yet in {root / '.sdd'}\n\n"
            "Tasks appear here as soon as anything writes them. To give the engine work,\n"
            "drop a ticket into .sdd/backlog/open/, for example hello.yaml:\n\n"
            "  title: Write hello.txt\n"
            "  completion_signals:\n"
            "    - {type: path_exists, path: hello.txt}\n\n"
            "and configure an agent in bernstein.yaml (agents.script.command), or run\n"
            "Bernstein itself here."
        )
    return (
        f"No .sdd/ directory in {root}\n\n"
        "This console shows what an orchestrator writes there. To start:\n\n"
        f"  bernstein-tui -C {root} init      create .sdd/ and a commented bernstein.yaml\n"
        "  bernstein run                   or run Bernstein itself in this directory\n\n"
        "The console is watching: it fills in as soon as .sdd/ appears."
    )


class ConsoleApp(App[int]):
    TITLE = "bernstein-tui"
    CSS_PATH = [stylesheet("base"), stylesheet("main")]
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("p", "problems", "Problems"),
        Binding("r", "retry", "Retry"),
        Binding("e", "escalate", "Escalate"),
        Binding("x", "cancel_task", "Cancel"),
        Binding("P", "proposals", "Proposals"),
    ]

    def __init__(self, root: Path, *, read_only: bool = False, engine: bool = False,
                 demo: bool = False) -> None:
        super().__init__()
        self.demo = demo
        self.source = LocalSource(root)
        self.read_only = read_only
        self.want_engine = engine and not read_only
        self.engine: Engine | None = None  # started in a thread; imported lazily
        self.counts: dict[str, int] = {}
        self.problem_count = 0
        self.loaded = False  # no "could not be read" toasts for what the first load finds
        self.selected: str | None = None
        self._events_seen = 0  # watcher thread only
        self._events_loaded = False  # watcher thread only: no toasts for past engine events
        self.trace = Trace.from_env()

    def compose(self) -> ComposeResult:
        where = str(self.source.paths.root) + ("  [read-only]" if self.read_only else "")
        if self.demo:
            where = "DEMO (scripted demo agent, no API keys) · " + where
        yield StatusBar(where, id="status")
        with Vertical(id="body"):
            yield Static("Reading .sdd/ …", id="empty", markup=False)
            yield TaskTable(id="tasks")
            yield TaskDetail(id="detail")
        yield Static("engine: off (watching only)" if not self.want_engine
                     else "engine: starting …", id="engine-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TaskTable).display = False
        self.query_one(TaskDetail).display = False
        self.set_interval(1.0, self._refresh_log)
        self.source.start(self._from_watcher, on_error=self._error_from_watcher)
        if self.want_engine:
            self.run_worker(self._start_engine, thread=True, exit_on_error=False,
                            name="start-engine")

    def on_unmount(self) -> None:
        self.source.stop()
        self.trace.close()
        if self.engine is not None:
            self.engine.stop(timeout=10)

    def _start_engine(self) -> None:
        """In a thread: the engine's start does file and git work."""
        from console.engine.engine import Engine

        try:
            engine = Engine(self.source.paths.root)
            engine.start(create=False)
        except OwnedElsewhere as exc:
            self.post_message(EngineStatus(f"engine: not started, watching only — {exc}", False))
            return
        except (EngineError, ConfigError) as exc:
            self.post_message(EngineStatus(f"engine: not started — {exc}", False))
            return
        except Exception as exc:  # never a traceback at the operator
            self.post_message(EngineStatus(f"engine: not started — {type(exc).__name__}: "
                                           f"{exc}", False))
            return
        self.engine = engine
        self.post_message(EngineStatus(
            f"engine: running, {engine.workers} worker(s), base branch '{engine.repo.base}'",
            True))

    # -- called in the watcher thread: only compute and post -------------------

    def _from_watcher(self, delta: Delta) -> None:
        with self.source.lock:
            state = self.source.state
            counts = dict(state.state_counts())
            problems = state.problem_count
            events = state.engine_events_since(self._events_seen)
            self._events_seen = state.engine_event_total
        loaded = self.source.loaded.is_set()
        self.post_message(StateChanged(delta, counts, problems, self.source.exists, loaded,
                                       events if self._events_loaded else []))
        self._events_loaded = loaded

    def _error_from_watcher(self, text: str) -> None:
        self.post_message(SourceError(text))

    # -- handlers on the event loop --------------------------------------------

    def on_state_changed(self, message: StateChanged) -> None:
        table = self.query_one(TaskTable)
        empty = self.query_one("#empty", Static)
        table.apply(message.delta)
        if self.trace.on and message.delta.upserts:
            self.call_after_refresh(self.trace.mark, "rows", list(message.delta.upserts),
                                    table.row_count)
        show_table = message.exists and table.row_count > 0
        if not show_table and (message.loaded or not message.exists):
            empty.update(empty_text(self.source.paths.root, message.exists))
        empty.display = not show_table
        table.display = show_table
        self.query_one(TaskDetail).display = show_table
        if self.selected is None and table.row_count:
            self._select(str(table.coordinate_to_cell_key((0, 0)).row_key.value))
        elif self.selected in message.delta.upserts or message.delta.sections & DETAIL_SECTIONS:
            self._select(self.selected)
        self.counts = message.counts
        if self.loaded and message.problems > self.problem_count:
            new = message.problems - self.problem_count
            self.notify(f"{new} record{'s' if new != 1 else ''} could not be read (p to list)",
                        severity="warning", timeout=4)
        self.problem_count = message.problems
        self.loaded = message.loaded
        for event in message.events:  # errors only: escalations are in the Chain tab
            if event.level == "error":
                self.notify(event.message, severity="error", timeout=8, markup=False)
        self.query_one(StatusBar).show(message.counts, message.problems)
        if "proposals" in message.delta.sections and isinstance(self.screen, ProposalsScreen):
            self.screen.refresh_rows()

    # -- the selected task's detail ----------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "tasks" and event.row_key.value is not None:
            self._select(str(event.row_key.value))

    def _select(self, task_id: str | None) -> None:
        self.selected = task_id
        with self.source.lock:
            self.query_one(TaskDetail).show(self.source.state, task_id)
        self._refresh_log()

    def _refresh_log(self) -> None:
        if self.selected is None:
            return
        with self.source.lock:
            task = self.source.state.tasks.get(self.selected)
        log = task.metadata.get("log") if task else None
        if log:
            self.run_worker(lambda: self._read_log(self.source.paths.root / str(log)),
                            thread=True, group="log", exclusive=True, exit_on_error=False)

    def _read_log(self, path: Path) -> None:
        text = read_log_tail(path)
        self.call_from_thread(self.query_one(TaskDetail).show_log, text)

    # -- operator actions ------------------------------------------------------

    def _control(self):  # type: ignore[no-untyped-def]
        """In a worker thread: the engine in this process, or whoever owns the project."""
        if self.engine is not None:
            from console.engine.control import EngineControl

            return EngineControl(self.engine)
        from console.engine.control import local_control

        return local_control(self.source.paths.root)

    def action_proposals(self) -> None:
        self.push_screen(ProposalsScreen(self.source, self.read_only))

    def act(self, name: str, call) -> None:  # type: ignore[no-untyped-def]
        """An operator action in a worker thread; its real outcome is shown."""
        self._act(name, call)

    def _act(self, name: str, call) -> None:  # type: ignore[no-untyped-def]
        def work() -> None:
            try:
                outcome = call(self._control())
            except Exception as exc:  # a refused owner, a broken project: said, not raised
                self.call_from_thread(self.notify, f"{name}: {exc}", severity="error",
                                      markup=False)
                return
            self.call_from_thread(self.notify, outcome.message, markup=False,
                                  severity="information" if outcome.ok else "error",
                                  timeout=6)

        self.run_worker(work, thread=True, group="actions", exit_on_error=False)

    def _target(self, action: str) -> str | None:
        if self.read_only:
            self.notify(f"{action} refused: the console is read-only", severity="warning")
            return None
        if self.selected is None:
            self.notify(f"{action}: select a task first", severity="warning")
        return self.selected

    def action_retry(self) -> None:
        task_id = self._target("retry")
        if task_id is not None:
            self._act("retry", lambda control: control.retry(task_id))

    def action_escalate(self) -> None:
        task_id = self._target("escalate")
        if task_id is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._act("escalate", lambda control: control.escalate(task_id))

        self.push_screen(ConfirmScreen(f"Escalate task {task_id}?",
                                       "Its next attempt runs on the next, more expensive "
                                       "model tier; a failed task is reopened for it."),
                         answered)

    def action_cancel_task(self) -> None:
        task_id = self._target("cancel")
        if task_id is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._act("cancel", lambda control: control.cancel(
                    task_id, "cancelled from the console"))

        self.push_screen(ConfirmScreen(f"Cancel task {task_id}?",
                                       "It and its subtasks are cancelled (terminal: it "
                                       "cannot be retried) and a running agent is killed."),
                         answered)

    def on_engine_status(self, message: EngineStatus) -> None:
        status = self.query_one("#engine-status", Static)
        status.update(message.text)
        status.set_class(not message.running, "-off")

    def on_source_error(self, message: SourceError) -> None:
        self.notify(message.text, severity="error", timeout=8)

    def action_problems(self) -> None:
        with self.source.lock:
            problems = self.source.state.problems
        self.push_screen(ProblemsScreen(problems))
