"""The CLI's exit codes and its one-line output, in one place (DESIGN §2).

Exit codes: 0 ok, 1 the thing asked for failed, 2 bad usage or unreadable input,
130 interrupted. Every error is one line on stderr, never a traceback
(BERNSTEIN_TUI_DEBUG=1 shows it).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from console.sdd.sanitize import display_text, json_display

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad usage or unreadable input: one line, exit 2."""


def say(text: object, file: TextIO | None = None) -> None:
    """One line made from data (an outcome, an error naming an id or a file): printed as
    display text, so nothing in it reaches the terminal as control."""
    print(display_text(text), file=file if file is not None else sys.stdout)


def warn(text: str) -> None:
    """`bernstein-tui: warning: …` on stderr."""
    say(f"bernstein-tui: warning: {text}", sys.stderr)


def print_json(value: object) -> None:
    """A JSON answer on stdout: data, so written with `json_display` (same value parsed)."""
    sys.stdout.write(json_display(json.dumps(value, indent=2, ensure_ascii=False)) + "\n")
