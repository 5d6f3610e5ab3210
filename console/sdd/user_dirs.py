"""Where this user's own files live (not the project's): the XDG directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def _xdg(variable: str, *under_home: str) -> Path:
    """`$variable` when it is an absolute path, else `~/<under_home>` (the XDG Base
    Directory spec ignores a relative one: it would land wherever the command runs, the
    project included)."""
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path.home().joinpath(*under_home)


def user_config_dir() -> Path:
    """`$XDG_CONFIG_HOME/bernstein-tui`, else `~/.config/bernstein-tui`: trust records
    and the console's settings."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "bernstein-tui"


def user_state_dir() -> Path:
    """`$XDG_STATE_HOME/bernstein-tui`, else `~/.local/state/bernstein-tui`: the
    checkpoint key."""
    return _xdg("XDG_STATE_HOME", ".local", "state") / "bernstein-tui"


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/bernstein-tui`, else `~/.cache/bernstein-tui`: what the console
    keeps of a project that is not the project's (checkpoints), so looking at a project
    writes nothing into it (DESIGN §7 "Looking changes nothing")."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "bernstein-tui"


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) as a directory only this user may enter (0700);
    an existing one is left as it is unless it is this user's and open to others, then
    it is closed. OSError when it cannot be made or is not a real directory."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"{path}: not a directory")
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def project_key(root: Path | str) -> str:
    """The name this user's files about a project go by (its checkpoint, its engine's
    control key, `web`'s engine log): the SHA-256 of the project's real path, so two
    paths to one project share them and no name from the project is ever a path."""
    import hashlib  # (4 ms: only once a file about a project is looked for)

    return hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()
