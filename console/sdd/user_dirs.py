"""Where this user's own files live (not the project's): the XDG directories."""

from __future__ import annotations

import os
from pathlib import Path


def user_config_dir() -> Path:
    """`$XDG_CONFIG_HOME/bernstein-tui`, else `~/.config/bernstein-tui`: trust records
    and the console's settings."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "bernstein-tui"


def user_state_dir() -> Path:
    """`$XDG_STATE_HOME/bernstein-tui`, else `~/.local/state/bernstein-tui`: the
    checkpoint key."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "bernstein-tui"
