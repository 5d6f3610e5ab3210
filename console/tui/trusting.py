"""Trusting the project from the console (DESIGN §7): `t` or the palette shows what
will run (a confirm modal), records the trust and starts the engine.

A mixin of ConsoleApp: it uses the app's source, engine, notifications and its
`_start_engine`. Hashing and reading bernstein.yaml happen in worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    _App = App[int]
else:
    _App = object


class TrustActions(_App):
    read_only: bool
    local: bool
    project_root: Path
    source: Any
    engine: Any
    want_engine: bool

    def action_trust(self) -> None:
        if not self.local:
            self.notify("trust: a task server's project runs where the server is",
                        severity="warning")
            return
        if self.read_only:
            self.notify("trust refused: the console is read-only", severity="warning")
            return
        self.run_worker(self._ask_trust, thread=True, group="trust", exclusive=True,
                        exit_on_error=False)

    def _ask_trust(self) -> None:
        """In a worker thread: what would run, then the modal on the event loop."""
        from console.sdd.sanitize import display_text
        from console.sdd.trust import TrustError, check, fingerprint, what_runs

        root = self.project_root
        try:
            status = check(root)
            runs = what_runs(root)
            expect = status.fingerprint or fingerprint(root)  # what the modal shows
        except TrustError as exc:
            self.call_from_thread(self.notify, f"trust: {exc}", severity="error",
                                  markup=False)
            return
        if status.trusted and self.engine is not None:
            self.call_from_thread(self.notify, "this project is trusted and its engine runs")
            return
        effect = "Its engine may then run:\n" + "\n".join(f"  • {line}" for line in runs)

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._trust_and_start(expect), thread=True,
                                group="trust", exit_on_error=False)

        from console.tui.screens.confirm import ConfirmScreen

        self.call_from_thread(self.push_screen,
                              ConfirmScreen(f"Trust {display_text(str(root))}?", effect), answered)

    def _trust_and_start(self, expect: Any) -> None:
        """In a worker thread: record the trust (if nothing changed meanwhile), start."""
        from console.sdd.trust import TrustError, trust

        try:
            record, warning = trust(self.project_root, expect)
        except TrustError as exc:
            self.call_from_thread(self.notify, f"trust: {exc}", severity="error", markup=False)
            return
        if warning:
            self.call_from_thread(self.notify, warning, severity="warning", markup=False)
        started = self.want_engine and self.engine is None
        self.call_from_thread(self.notify, f"trusted (config hash {record.digest[:12]})"
                              + ("; starting the engine" if started
                                 else "; the engine stays off (--no-engine)"
                                 if not self.want_engine else ""), markup=False)
        if started:
            self._start_engine()  # type: ignore[attr-defined]  # ConsoleApp's, this mixin's host
