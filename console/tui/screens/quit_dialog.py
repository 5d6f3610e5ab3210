"""What `q` asks while this console's agents work: stop the engine and quit, detach
(the engine keeps running in the background), or cancel (issue #19.3)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

#: the answers (the dialog's result; None: cancel)
STOP = "stop"
DETACH = "detach"


class QuitDialog(ModalScreen[str | None]):
    AUTO_FOCUS = "*"
    BINDINGS = [Binding("s", "answer('stop')", "Stop and quit"),
                Binding("d", "answer('detach')", "Detach"),
                Binding("c,escape", "answer(None)", "Cancel")]

    def __init__(self, running: int, *, detachable: bool) -> None:
        super().__init__()
        self.running = running
        self.detachable = detachable

    def compose(self) -> ComposeResult:
        agents = f"{self.running} agent{'s' if self.running != 1 else ''}"
        effect = (f"Stop: the engine kills {agents} and reopens their tasks (their spend "
                  "so far is lost).")
        if self.detachable:
            effect += ("\nDetach: the engine keeps running in the background; "
                       "bernstein-tui on this project re-attaches to it.")
        with Vertical(id="quit-dialog"):
            yield Static(f"{agents} at work. Quit?", id="quit-question", markup=False)
            yield Static(effect, id="quit-effect", markup=False)
            with Horizontal(id="quit-buttons"):
                yield Button("Stop and quit (s)", id=STOP, variant="error")
                if self.detachable:
                    yield Button("Detach (d)", id=DETACH, variant="primary")
                yield Button("Cancel (c)", id="cancel", variant="default")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id if event.button.id != "cancel" else None)

    def action_answer(self, choice: str | None) -> None:
        if choice == DETACH and not self.detachable:
            self.app.notify("detach is not available here: quitting stops the engine",
                            severity="warning")
            return
        self.dismiss(choice)
