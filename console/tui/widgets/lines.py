"""A Static of whole lines that repaints only when its text or styles change, and
lays the screen out again only when its number of lines changes.

For the header, the SLA strip and the view line, which are re-shown on every batch
or every second: their styles set `text-wrap: nowrap`, so a text line is one row
and the line count is their height.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class Lines(Static):
    _shown: tuple[str, tuple[object, ...]] | None = None  # text and styles last shown

    def show_lines(self, text: str | Content) -> None:
        # Content's == compares the text only: the spans carry the styles
        shown = (text.plain, tuple(text.spans)) if isinstance(text, Content) else (text, ())
        if shown == self._shown:
            return
        same_height = self._shown is not None and (
            self._shown[0].count("\n") == shown[0].count("\n"))
        self._shown = shown
        self.update(text, layout=not same_height)
