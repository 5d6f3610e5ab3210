"""What the console remembers between runs: the theme.

`$BERNSTEIN_TUI_CONFIG` names the file; else `$XDG_CONFIG_HOME/bernstein-tui/
settings.json` (`~/.config/...`). A missing or broken file means the defaults;
it is never fatal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.sdd.fileio import atomic_write_json
from console.sdd.user_dirs import user_config_dir


def settings_path() -> Path:
    explicit = os.environ.get("BERNSTEIN_TUI_CONFIG")
    if explicit:
        return Path(explicit)
    return user_config_dir() / "settings.json"


def _load() -> dict[str, object]:
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_theme() -> str | None:
    theme = _load().get("theme")
    return theme if isinstance(theme, str) else None


def bell_enabled() -> bool:
    return _load().get("bell") is True or os.environ.get("BERNSTEIN_TUI_BELL") == "1"


def save_theme(theme: str) -> None:
    data = _load()
    data["theme"] = theme
    try:
        path = settings_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, data)
    except OSError:
        pass  # remembering the theme is a convenience, never an error
