"""A screen whose view is derived from the State (rows, totals, a report) builds it in
a thread, never on the event loop: `refresh_rows()` starts one build; a refresh asked
for while one runs is built once more after it (builds never overlap, so an older view
never lands after a newer one — Dolphie's re-armed one-shot worker). The worker posts
the finished view as a message and the screen lays it out.

A mixin of a Screen that has a `source` (read under its lock) and defines
`build_view()` (in the worker thread) and `show_view(view)` (on the event loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.message import Message
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen[None]
else:
    _Screen = object


class BuiltView(_Screen):
    #: the State's sections whose changes this view follows (the app asks for a refresh)
    SECTIONS: ClassVar[frozenset[str]] = frozenset()
    _building = False
    _stale = False

    class Built(Message):
        """A view built in the worker, ready to be shown."""

        def __init__(self, view: Any) -> None:
            super().__init__()
            self.view = view

    def build_view(self) -> Any:
        raise NotImplementedError

    def show_view(self, view: Any) -> None:
        raise NotImplementedError

    def refresh_rows(self) -> None:
        """Build the view again from the State (off the event loop)."""
        if self._building:
            self._stale = True
            return
        self._building = True
        self._build()

    @work(thread=True, group="view", exit_on_error=False)
    def _build(self) -> None:
        self.post_message(self.Built(self.build_view()))

    def on_built_view_built(self, message: BuiltView.Built) -> None:
        message.stop()
        self._building = False
        self.show_view(message.view)
        self._again()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # a failed build is reported by the app (the event bubbles on); the next
        # refresh must still run
        if event.worker.group == "view" and event.state in (WorkerState.ERROR,
                                                            WorkerState.CANCELLED):
            self._building = False
            self._again()

    def _again(self) -> None:
        if self._stale:
            self._stale = False
            self.refresh_rows()
