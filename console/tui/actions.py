"""The operator actions of the console (DESIGN §5), carried out by the app: screens ask
with an `OperatorRequest` message (retry, escalate, cancel, approve, reject); pause,
resume and copy are the app's own keys. Each runs through a `Control` in an "actions"
worker thread, which posts its real outcome (`ActionDone`) or fails — and one handler
turns any failed worker of the console into a one-line notification. `--read-only`
refuses them all.

A mixin of ConsoleApp: it uses the app's source, engine, selection and notifications.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.worker import Worker, WorkerState

from console.sdd.sanitize import display_text
from console.tui.history import Session
from console.tui.messages import ActionDone, OperatorRequest

if TYPE_CHECKING:
    from textual.app import App

    _App = App[int]
else:
    _App = object

#: a failed worker's notification: its first line, this many characters at most
FAILURE_LIMIT = 300


class OperatorActions(_App):
    read_only: bool
    local: bool
    project_root: Path
    source: Any
    engine: Any
    control_factory: Any
    main: Any  # the main screen: its selection is the task a key acts on
    history: Session

    def _control(self) -> Any:
        """In a worker thread: the engine in this process, or whoever owns the project."""
        if self.control_factory is not None:
            return self.control_factory()
        if self.engine is not None:
            from console.engine.control import EngineControl

            return EngineControl(self.engine)
        from console.engine.control import local_control

        return local_control(self.project_root)

    def on_operator_request(self, request: OperatorRequest) -> None:
        if self.read_only:
            self.notify(f"{request.name} refused: the console is read-only",
                        severity="warning")
            return
        # the worker's name says which action failed, if it does
        self._carry_out(request).name = request.name

    @work(thread=True, group="actions", exit_on_error=False)
    def _carry_out(self, request: OperatorRequest) -> None:
        """In a worker thread: the action through the Control; its outcome posted."""
        self.post_message(ActionDone(request.name, request.call(self._control())))

    def on_action_done(self, message: ActionDone) -> None:
        self.history.action(message.name, message.outcome.ok, message.outcome.message)
        self.notify(message.outcome.message, markup=False, timeout=6,
                    severity="information" if message.outcome.ok else "error")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker of the console that fails (a refused owner, a broken project, a
        bug) is said in one line: never silent, never a traceback."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        text = str(error).strip().splitlines()[0] if str(error).strip() else \
            type(error).__name__
        what = event.worker.name or event.worker.group
        self.notify(display_text(f"{what}: {text}", limit=FAILURE_LIMIT),
                    severity="error", markup=False, timeout=8)

    def action_pause(self) -> None:
        """Pause a running engine, or resume a paused one; on a task server, drain it or
        resume it, as its `GET /drain` says."""
        if not self.local:
            self.post_message(OperatorRequest("drain", lambda control: control.toggle_drain()))
            return
        with self.source.lock:
            engine = self.source.state.engine_status
        if engine is not None and engine.running and engine.paused:
            self.post_message(OperatorRequest("resume", lambda control: control.resume()))
        else:
            self.post_message(OperatorRequest("pause", lambda control: control.pause()))

    def action_copy(self, what: str) -> None:
        """Copy the selected task's id or worktree path (OSC 52), and show it too."""
        selected: str | None = self.main.selected
        if selected is None:
            self.notify("copy: select a task first", severity="warning")
            return
        text = selected
        if what == "worktree" and not self.local:
            self.notify("worktrees live on the agents' hosts, not here", severity="warning")
            return
        if what == "worktree":
            with self.source.lock:
                task = self.source.state.tasks.get(selected)
            session = task.metadata.get("session") if task else None
            worktree = self.project_root / ".sdd" / "worktrees" / str(session)
            if not session or task is None or task.is_terminal:
                self.notify(f"task {selected} has no worktree now (one exists only "
                            "while an attempt runs)", severity="warning")
                return
            text = str(worktree)
        self.copy_to_clipboard(text)
        self.notify(f"copied {text}\n(if your terminal ignores OSC 52, select it here)",
                    markup=False, timeout=8)
