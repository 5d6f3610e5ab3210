"""A small confirm dialog that names the task and the effect (destructive actions)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.sdd.sanitize import display_text


class ConfirmScreen(ModalScreen[bool]):
    AUTO_FOCUS = "*"  # its content, from the first key
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, effect: str) -> None:
        super().__init__()
        # they name a task or proposal by its id: data, shown as text
        self.question = display_text(question, multiline=True)
        self.effect = display_text(effect, multiline=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.question, id="confirm-question", markup=False)
            yield Static(self.effect, id="confirm-effect", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Yes (y)", id="yes", variant="warning")
                yield Button("No (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
