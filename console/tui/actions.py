"""The operator actions of the console (DESIGN §5): retry, escalate, cancel, pause
and resume, copy. Each goes through a `Control` in a worker thread and shows its real
outcome or the refusal's reason; `--read-only` refuses them all.

A mixin of ConsoleApp: it uses the app's source, engine, selection and notifications.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class OperatorActions:
    read_only: bool
    selected: str | None
    local: bool
    project_root: Path
    source: Any
    engine: Any
    control_factory: Any

    def _control(self):  # type: ignore[no-untyped-def]
        """In a worker thread: the engine in this process, or whoever owns the project."""
        if self.control_factory is not None:
            return self.control_factory()
        if self.engine is not None:
            from console.engine.control import EngineControl

            return EngineControl(self.engine)
        from console.engine.control import local_control

        return local_control(self.project_root)

    def act(self, name: str, call) -> None:  # type: ignore[no-untyped-def]
        """An operator action in a worker thread; its real outcome is shown."""
        if self.read_only:
            self.notify(f"{name} refused: the console is read-only", severity="warning")
            return

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

    def _target(self, action: str, task_id: str | None = None) -> str | None:
        if self.read_only:
            self.notify(f"{action} refused: the console is read-only", severity="warning")
            return None
        task_id = task_id or self.selected
        if task_id is None:
            self.notify(f"{action}: select a task first", severity="warning")
        return task_id

    def action_retry(self, task_id: str | None = None) -> None:
        target = self._target("retry", task_id)
        if target is not None:
            self.act("retry", lambda control: control.retry(target))

    def _confirmed(self, name: str, question: str, effect: str, call) -> None:  # type: ignore[no-untyped-def]
        """Ask first (a modal naming the task and the effect); act only on yes."""
        from console.tui.screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.act(name, call)

        self.push_screen(ConfirmScreen(question, effect), answered)

    def action_escalate(self, task_id: str | None = None) -> None:
        target = self._target("escalate", task_id)
        if target is not None:
            self._confirmed("escalate", f"Escalate task {target}?",
                            "Its next attempt runs on the next, more expensive model tier; "
                            "a failed task is reopened for it.",
                            lambda control: control.escalate(target))

    def action_cancel_task(self, task_id: str | None = None) -> None:
        target = self._target("cancel", task_id)
        if target is not None:
            self._confirmed("cancel", f"Cancel task {target}?",
                            "It and its subtasks are cancelled (terminal: it cannot be "
                            "retried) and a running agent is killed.",
                            lambda control: control.cancel(target, "cancelled from the console"))

    def action_pause(self) -> None:
        """Pause a running engine, or resume a paused one; on a task server, drain it or
        resume it, as its `GET /drain` says."""
        if not self.local:
            self.act("drain", lambda control: control.toggle_drain())
            return
        with self.source.lock:
            engine = self.source.state.engine_status
        if engine is not None and engine.running and engine.paused:
            self.act("resume", lambda control: control.resume())
        else:
            self.act("pause", lambda control: control.pause())

    def action_copy(self, what: str) -> None:
        """Copy the selected task's id or worktree path (OSC 52), and show it too."""
        if self.selected is None:
            self.notify("copy: select a task first", severity="warning")
            return
        text = self.selected
        if what == "worktree" and not self.local:
            self.notify("worktrees live on the agents' hosts, not here", severity="warning")
            return
        if what == "worktree":
            with self.source.lock:
                task = self.source.state.tasks.get(self.selected)
            session = task.metadata.get("session") if task else None
            worktree = self.project_root / ".sdd" / "worktrees" / str(session)
            if not session or task is None or task.is_terminal:
                self.notify(f"task {self.selected} has no worktree now (one exists only "
                            "while an attempt runs)", severity="warning")
                return
            text = str(worktree)
        self.copy_to_clipboard(text)
        self.notify(f"copied {text}\n(if your terminal ignores OSC 52, select it here)",
                    markup=False, timeout=8)

