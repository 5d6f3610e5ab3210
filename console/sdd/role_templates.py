"""What a project's role templates steer, for the trust hash and the trust dialog.

Role templates (`templates/roles/<role>/`, or the `roles_dir` bernstein.yaml names)
pick each role's model and effort (`config.yaml`) and give its agents their system
and task prompts: a project that changes them changes what its agents are told and
which model (and bill) they run on, so they are trusted like its configuration.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from console.sdd.confine import UnsafePath, within
from console.sdd.fileio import read_regular_file
from console.sdd.safe_yaml import load_yaml

DEFAULT_ROLES_DIR = "templates/roles"
MAX_ROLES = 200  # listed; the hash takes them all
PROMPTS = ("system_prompt.md", "task_prompt.md")


def roles_dir(root: Path) -> str | None:
    """The roles directory bernstein.yaml names, relative to the project and confined
    to it (None when it cannot be read, leaves the project or passes through a link)."""
    from console.sdd.project_config import ConfigError, load_config

    try:
        relative = load_config(root).roles_dir
        within(root, relative, what="roles_dir")
    except (ConfigError, UnsafePath, ValueError):
        return None
    return Path(os.path.normpath(relative)).as_posix()


def _model(directory: Path) -> str:
    data, _ = read_regular_file(directory / "config.yaml", "config.yaml", 256 * 1024)
    if not data:
        return ""
    try:
        config = load_yaml(data.decode("utf-8", "replace"))
    except yaml.YAMLError:
        return ""
    if not isinstance(config, dict):
        return ""
    return str(config.get("model") or config.get("default_model") or "")


def role_lines(root: Path) -> list[str]:
    """One line per role template: its model pick and the prompts it replaces (not yet
    sanitised)."""
    relative = roles_dir(root) or DEFAULT_ROLES_DIR
    base = root / relative
    if base.is_symlink() or not base.is_dir():
        return []
    try:
        names = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    lines = []
    for name in names[:MAX_ROLES]:
        directory = base / name
        model = _model(directory)
        prompts = [p for p in PROMPTS if (directory / p).is_file()]
        picks = [f"model {model}" if model else "", *(f"its {p}" for p in prompts)]
        lines.append(f"role template {relative}/{name}: "
                     + (", ".join(p for p in picks if p) or "no settings"))
    if len(names) > MAX_ROLES:
        lines.append(f"role templates: {len(names) - MAX_ROLES} more in {relative}/")
    return lines
