"""Where the .tcss files are: inside the wheel (console/styles) or the source tree (styles/)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def styles_dir() -> Path:
    for candidate in (_PACKAGE / "styles", _PACKAGE.parent / "styles"):
        if (candidate / "base.tcss").is_file():
            return candidate
    raise FileNotFoundError(f"bernstein-tui stylesheets not found next to {_PACKAGE}")


def stylesheet(name: str) -> Path:
    return styles_dir() / f"{name}.tcss"
