"""The one boundary where data becomes display text (DESIGN §7 "One sanitiser").

Everything shown on a screen or printed by a text command comes from data that
anyone could have written: task ids and titles, gate details and digests, agent
output, a server's error messages. None of it may drive the terminal. Like
git's `core.quotePath` and `less -R`, data is text, never control:

- `display_text` turns any value into a string with no terminal control in it:
  C0/C1 control characters, DEL and ESC, bidi overrides and isolates, zero-width
  and other invisible format characters, line and paragraph separators and lone
  surrogates become visible escapes (`\\x1b`, `\\u202e`, `\\n`). A multi-line pane
  (a diff, a digest, a log) keeps real newlines (tabs become spaces); a one-line
  place (a table cell, a header, an error line) shows `\\n` and `\\t` instead.
  An optional limit cuts long text with an ellipsis.
- `sgr_only` is for agent logs: it keeps SGR colour and style codes (`ESC [ … m`
  with numeric parameters, minus conceal and blink) and drops every other escape
  sequence — OSC (hyperlinks, clipboard, title) with BEL or ST, CSI cursor and
  erase, DCS, SOS, PM, APC, bare ESC, 8-bit C1 introducers; the text between is
  made safe by `display_text`. `rich.text.Text.from_ansi` renders the result.

- `json_display` is for `--json` answers: the same characters become JSON `\\u`
  escapes, so the parsed value is unchanged.

None interprets Rich or Textual markup: callers put the result into `Text` /
`Content` objects (`data_text` makes the `Text`) or print it with markup off,
never into markup strings.

Standard library only at import (the `sdd` layer, loaded by every text command;
`data_text` imports Rich when first called).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

ELLIPSIS = "…"
#: what a one-line cell (a table's, a palette entry's) holds at most, in characters
CELL_LIMIT = 500

# Unicode format (Cf) characters, line/paragraph separators (Zl, Zp) and surrogates
# (Cs), as of Unicode 14: invisible characters that reorder, join or hide text
_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
           "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
           "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
           "\U000e0020-\U000e007f\ud800-\udfff")
#: every character a one-line place shows as an escape
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_FORMAT}]")
#: the same, but a newline stays (tabs are expanded before this runs)
_UNSAFE_MULTI = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_FORMAT}]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:max(0, limit - 1)] + ELLIPSIS


def display_text(value: object, *, multiline: bool = False, limit: int | None = None) -> str:
    """Any data value as display text with no control in it.

    `multiline`: keep newlines (CR LF and lone CR become one newline; tabs become
    spaces to the next multiple of 8); otherwise the text stays one line, with
    `\\n`, `\\t` shown. `limit`: at most this many characters, the last an ellipsis.
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None:
        text = _cut(text, limit)  # first: a 10 MB title is not escaped whole
    if multiline:
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\t" in text:
            text = text.expandtabs(8)
        pattern = _UNSAFE_MULTI
    else:
        pattern = _UNSAFE_LINE
    if pattern.search(text) is not None:
        text = pattern.sub(_escape, text)
        if limit is not None:
            text = _cut(text, limit)
    return text


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells an astral character as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_display(text: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`) safe for a terminal: every
    character `display_text` would escape is written as a JSON `\\u` escape instead,
    so the parsed value is the same and no C1 control, bidi override or lone surrogate
    reaches the terminal (or fails to encode). JSON already escapes C0 and ESC."""
    return _UNSAFE_MULTI.sub(_json_escape, text)


def data_text(value: object, style: str = "", *, multiline: bool = False,
              limit: int | None = None) -> Text:
    """`display_text` as a Rich `Text` (never markup), for a table cell or a pane."""
    from rich.text import Text  # imported on use: the text commands that print none skip it

    return Text(display_text(value, multiline=multiline, limit=limit), style=style)


# -- agent logs: SGR colours at most --------------------------------------------

# an escape sequence or a C1 introducer, whichever comes first:
#   CSI  ESC [ or 0x9b, parameters, intermediates, a final byte
#   string commands (OSC, DCS, SOS, PM, APC), 7- or 8-bit, up to BEL or ST; one left
#   open runs to the end of its line (a terminal would swallow the rest: we show it)
#   any other ESC sequence (ESC c, ESC 7, ESC ( B …) and a bare ESC
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)(?P<params>[\x30-\x3f]*)(?P<inter>[\x20-\x2f]*)(?P<final>[\x40-\x7e])?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?")
#: SGR parameters dropped: 5/6 blink, 8 conceal (hides text), 28 reveal (pairs with 8)
_DROPPED_SGR = frozenset({5, 6, 8, 28})
_EXTENDED_COLOUR = (38, 48, 58)


#: a parameter past this many digits (leading zeros aside) is out of every range we keep
_SGR_DIGITS = 3


def _number(digits: str) -> int:
    """One SGR parameter's value, its digits capped before converting: ESC [ followed by
    5,000 nines is out of range (dropped), never a ValueError or a quadratic `int()`."""
    digits = digits.lstrip("0")
    return int(digits or "0") if len(digits) <= _SGR_DIGITS else 10 ** _SGR_DIGITS


def _safe_sgr(params: str) -> str | None:
    """The SGR parameters worth keeping, or None when nothing is left."""
    if not params:
        return "0"  # ESC [ m is a reset
    if not all(c.isdigit() or c == ";" for c in params):
        return None  # private (`?`), colon sub-parameters: not colour codes we parse
    numbers = [_number(p) for p in params.split(";")]
    kept: list[int] = []
    index = 0
    while index < len(numbers):
        code = numbers[index]
        if code in _EXTENDED_COLOUR and index + 1 < len(numbers):
            # 38;5;N and 38;2;R;G;B: the arguments are colours, not codes (38;5;8 is grey)
            size = {5: 3, 2: 5}.get(numbers[index + 1], 2)
            chunk = numbers[index:index + size]
            if len(chunk) == size and all(n <= 255 for n in chunk[1:]) and code != 58:
                kept += chunk
            index += size
            continue
        if code not in _DROPPED_SGR and code <= 107:
            kept.append(code)
        index += 1
    return ";".join(map(str, kept)) if kept else None


def sgr_only(text: str, *, limit: int | None = None) -> str:
    """An agent's output with SGR colour codes kept and every other escape dropped;
    what is left between them is `display_text(..., multiline=True)`."""
    if limit is not None:
        text = _cut(text, limit)
    if _UNSAFE_MULTI.search(text) is None:  # no ESC, no control: nothing to do
        return text
    text = text.replace("\r\n", "\n")
    out: list[str] = []
    at = 0
    for match in _SEQUENCE.finditer(text):
        out.append(display_text(text[at:match.start()], multiline=True))
        at = match.end()
        if match.group("final") == "m" and not match.group("inter") and \
                match.group().startswith("\x1b"):
            params = _safe_sgr(match.group("params"))
            if params is not None:
                out.append(f"\x1b[{params}m")
    out.append(display_text(text[at:], multiline=True))
    return "".join(out)
