"""Small terminals (#19.6): below `NARROW_BELOW` columns a screen gets the `-narrow` class
(memray's toggle; styles may follow it) and its footer becomes compact, without the
palette key, listing only the keys that matter most — so `? Help` is always on it (help
lists every key, and every key still works).

A mixin of a Screen with a Footer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from textual import events
from textual.binding import ActiveBinding
from textual.widgets import Footer

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen[None]
else:
    _Screen = object

NARROW_BELOW = 100
#: the actions a narrow footer still lists
NARROW_FOOTER = frozenset({"retry", "escalate", "cancel_task", "filter", "approve", "reject",
                           "back", "app.pop_screen", "help", "quit"})


class FitsNarrow(_Screen):
    def on_resize(self, event: events.Resize) -> None:
        self.fit_width()

    def fit_width(self) -> None:
        """The class and the footer for the screen's width (also for a footer mounted
        late)."""
        narrow = self.size.width < NARROW_BELOW
        self.set_class(narrow, "-narrow")
        for footer in self.query(Footer):
            if footer.compact != narrow:
                footer.compact = narrow
                footer.show_command_palette = not narrow
                self.refresh_bindings()

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        bindings = super().active_bindings
        if not self.has_class("-narrow"):
            return bindings
        return {key: active if not active.binding.show or active.binding.action in NARROW_FOOTER
                else active._replace(binding=replace(active.binding, show=False))
                for key, active in bindings.items()}
