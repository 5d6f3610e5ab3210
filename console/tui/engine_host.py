"""The console's engine: started when the project allows it, watched while it runs, and
stopped, kept or left running when the operator quits (issue #19.3).

- **Start when possible.** The engine is tried at start and again every
  `SUPERVISE_EVERY_S` while none runs: a directory that gets `init`, `git init` and a
  ticket from another shell gets its engine without a restart, and an engine that ran
  elsewhere and stopped is taken over.
- **Say whose it is.** An engine this console did not start (a `bernstein-tui run`, a
  detached console's, a live Bernstein) is named in the header as running elsewhere;
  `engine_status.json` saying "running" with nobody holding the project is shown as dead.
- **Quit respects the work.** With agents running, `q` asks: stop the engine and quit,
  detach (the engine keeps running in the background, the console re-attaches next
  time), or cancel. `ctrl+c` twice quits at once, stopping the engine.

A mixin of ConsoleApp: it uses the app's source, main screen and notifications.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.engine.errors import EngineError, OwnedElsewhere, Untrusted
from console.tui.messages import EngineAlert, EngineStatus

if TYPE_CHECKING:
    from textual.app import App

    from console.engine.engine import Engine

    _App = App[int]
else:
    _App = object

#: how often a console without an engine looks again (seconds)
SUPERVISE_EVERY_S = 2.0
#: a second ctrl+c within this many seconds quits at once
FORCE_WINDOW_S = 2.0


class EngineHost(_App):
    local: bool
    read_only: bool
    demo: bool
    project_root: Path
    source: Any
    main: Any
    want_engine: bool
    engine: Engine | None
    #: the CLI can keep this process running headless after the screen closes
    can_detach: bool
    detaching: bool

    def _init_engine_host(self) -> None:
        self._engine_guard = threading.Lock()  # one start at a time (supervisor, `t`)
        self._engine_said: tuple[str, str] | None = None
        self._last_ctrl_c = 0.0
        self.detaching = False

    # -- start -----------------------------------------------------------------

    def _start_engine(self) -> None:
        """In a thread: the engine's start does file and git work. Says in the header
        what runs the project when it is not this console."""
        from console.engine.engine import Engine
        from console.sdd.project_config import ConfigError

        with self._engine_guard:
            if self.engine is not None or self.detaching or not self.want_engine:
                return
            try:
                engine = Engine(self.project_root, trusted=self.demo,  # a demo we wrote
                                on_write_problem=self._write_problem)
                engine.start(create=False)
            except Untrusted as exc:  # watch-only until the operator trusts it (t)
                self._say_engine("engine: off (watch-only)", f"⚠ {exc} (or press t)")
                return
            except OwnedElsewhere:
                self._say_engine(self._elsewhere_line())
                return
            except (EngineError, ConfigError) as exc:
                self._say_engine(f"engine: not started — {exc}")
                return
            except Exception as exc:  # never a traceback at the operator
                self._say_engine(f"engine: not started — {type(exc).__name__}: {exc}")
                return
            self.engine = engine
        self._engine_said = None
        self.post_message(EngineStatus(
            f"engine: running, {engine.workers} worker(s), base branch '{engine.repo.base}'",
            True))

    def _say_engine(self, text: str, untrusted: str = "", *, live: bool = True) -> None:
        """The header's engine line, posted only when it changed (the supervisor says
        the same every few seconds)."""
        if self._engine_said == (text, untrusted):
            return
        self._engine_said = (text, untrusted)
        self.post_message(EngineStatus(text, False, untrusted, status_live=live))

    def _elsewhere_line(self) -> str:
        from console.engine.lock import find_owner, owned_message
        from console.sdd.paths import SddPaths

        owner = find_owner(SddPaths(self.project_root))
        if owner is None:
            return "engine: none running"
        if owner.what.startswith("bernstein "):  # a live Bernstein: act through its server
            return "engine: not started, watching only — " + owned_message(None, owner)
        return (f"engine: {owner}, not started by this console (it keeps running when you "
                "quit; actions go to it)")

    def _supervise(self) -> None:
        """In a thread, every SUPERVISE_EVERY_S while this console runs no engine: start
        one if the project now allows it; else say who runs it, or that the engine
        `engine_status.json` names is dead."""
        if self.engine is not None or self.detaching or not self.local:
            return
        from console.engine.lock import find_owner
        from console.sdd.paths import SddPaths

        owner = find_owner(SddPaths(self.project_root))
        if owner is None and self.want_engine and (self.project_root / ".sdd").is_dir():
            self._start_engine()
            if self.engine is not None:
                return
        elif owner is not None:
            self._say_engine(self._elsewhere_line())
            return
        with self.source.lock:
            status = self.source.state.engine_status
        if status is not None and status.running:  # nobody holds the project
            stopped = time.strftime("%H:%M:%S", time.localtime(status.updated_at or 0))
            self._say_engine(f"engine: pid {status.pid} is dead (last seen {stopped}; its "
                             "tasks reopen when an engine starts)", live=False)
        elif not self.want_engine:
            self._say_engine("engine: off (watching only)")

    def _write_problem(self, why: str | None) -> None:
        """From the engine's thread: what stops it writing (None: it writes again)."""
        self.post_message(EngineAlert(why or ""))

    # -- quit ------------------------------------------------------------------

    def _agents_running(self) -> int:
        engine = self.engine
        return len(engine.running) if engine is not None else 0

    async def action_quit(self) -> None:
        """`q`: at once when nothing of this console's is at work; else ask."""
        running = self._agents_running()
        if not running:
            self.exit()
            return
        from console.tui.screens.quit_dialog import DETACH, STOP, QuitDialog

        def answered(choice: str | None) -> None:
            if choice == STOP:
                self.exit()
            elif choice == DETACH:
                self.detach()

        self.push_screen(QuitDialog(running, detachable=self.can_detach), answered)

    def detach(self) -> None:
        """Close the screen and keep the engine running in this process, headless (the
        CLI carries it on); without the CLI's support, say so and stay."""
        if not self.can_detach or self.engine is None:
            self.notify("detach is not available here: quitting stops the engine",
                        severity="warning")
            return
        self.detaching = True  # the CLI reads it once the app has exited
        self.exit()

    def action_help_quit(self) -> None:
        """ctrl+c: a second one within FORCE_WINDOW_S quits at once (the engine stops)."""
        now = time.monotonic()
        if now - self._last_ctrl_c <= FORCE_WINDOW_S:
            self.exit()
            return
        self._last_ctrl_c = now
        running = self._agents_running()
        what = (f"stop the engine ({running} agent{'s' if running != 1 else ''} running) "
                "and quit" if running else "quit")
        self.notify(f"ctrl+c again to {what} at once; q asks first", timeout=FORCE_WINDOW_S)

    def _stop_engine(self) -> None:
        """In a thread, on SIGHUP/SIGTERM or on exit: the engine's agents stopped, its
        tasks reopened — unless the operator detached, when it keeps running."""
        if self.engine is not None and not self.detaching:
            self.engine.stop(timeout=10)
