"""The one confinement check (DESIGN §7): ids and paths that come from data.

Everything in a project is data an attacker may have written: a task id, a role, a
proposal id, a ticket path in a task's metadata, a log path, a worktree name, a
request in the control inbox. Before any of it becomes part of a filesystem path:

* an id must match `SAFE_ID` (letters, digits, `.`, `_`, `-`; starts with a letter or
  digit; no `..`; at most 128 characters) — it is then one path component and a valid
  piece of a git branch name;
* a path built from it must stay inside its directory, and no directory between the
  project root and it may be a symbolic link (a committed `.sdd/worktrees -> ../..`
  must not turn a clean-up into deleting the operator's files);
* only a real directory (by `lstat`, links never followed) is ever removed.

A refusal is one line: `UnsafeId` (a ValueError) for an id, `UnsafePath` (an
OSError, so every writer's existing `except OSError` reports it) for a path.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from console.sdd.fields import brief

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SDD = ".sdd"


class UnsafeId(ValueError):
    """An id from data that cannot be used to build a path or a branch name."""


class UnsafePath(OSError):
    """A path built from data that would leave its directory or pass through a link."""


def is_safe_id(value: object) -> bool:
    return (isinstance(value, str) and SAFE_ID.fullmatch(value) is not None
            and ".." not in value and not value.endswith((".", ".lock")))


def safe_id(value: object, what: str = "id") -> str:
    """`value` when it is a safe id, else UnsafeId naming `what` and the value."""
    if is_safe_id(value):
        return str(value)
    return _refuse_id(value, what)


def _refuse_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UnsafeId(f"{what} is {'empty' if value == '' else 'missing'}")
    raise UnsafeId(f"{what} {brief(value)} is not a safe id (letters, digits, '.', '_', "
                   "'-'; starting with a letter or digit; no '..'; at most 128 characters)")


def _links_between(top: Path, path: Path) -> Path | None:
    """The first existing component below `top` on the way to `path` (itself included)
    that is a symbolic link, or None. `path` must be lexically under `top`."""
    current = top
    for part in path.relative_to(top).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return None  # what does not exist yet is created as a real directory
        if stat.S_ISLNK(mode):
            return current
    return None


def within(base: Path, *parts: str | Path, what: str = "path", top: Path | None = None
           ) -> Path:
    """`base` joined with `parts`, refused unless it stays strictly inside `base` and no
    component below `top` (default `base`; the project root when `base` is in `.sdd/`)
    on the way to it, the result included, is a symbolic link."""
    for part in parts:
        text = os.fspath(part)
        if not text or os.path.isabs(text) or "\0" in text:
            raise UnsafePath(f"{what} {brief(text)} is not a relative path inside {base.name}/")
    candidate = base.joinpath(*parts)
    normal = Path(os.path.normpath(candidate))
    if normal == base or not normal.is_relative_to(base):
        raise UnsafePath(f"{what} {brief(os.fspath(Path(*parts)))} leaves {base.name}/")
    link = _links_between(top if top is not None and base.is_relative_to(top) else base,
                          normal)
    if link is not None:
        raise UnsafePath(f"{link} is a symbolic link; refusing to follow it for {what} "
                         f"(replace it with a real directory)")
    return normal


def resolve_inside(base: Path, relative: str, where: str = "the worktree") -> Path:
    """For an agent's own worktree, where links of its own are fine: `relative` (or an
    absolute path) with every link resolved must stay inside `base`; UnsafePath naming
    why otherwise ('..' is refused before anything is resolved)."""
    root = base.resolve()
    candidate = Path(relative)
    if not candidate.is_absolute() and ".." in candidate.parts:
        raise UnsafePath(f"path {brief(relative)} uses '..', outside {where}")
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root):
        why = "a symlink out of" if not candidate.is_absolute() else "outside"
        raise UnsafePath(f"path {brief(relative)} is {why} {where}")
    return resolved


def sdd_path(root: Path, *parts: str | Path, what: str = "path") -> Path:
    """A path inside `root/.sdd/`, with `.sdd` itself no link either."""
    return within(root / SDD, *parts, what=what, top=root)


def check_write_path(path: Path) -> None:
    """For the writers in fileio: a file under a `.sdd/` must not be reached through a
    symbolic link anywhere from `.sdd` down (the file itself included)."""
    parts = Path(os.path.normpath(path)).parts
    if SDD in path.parts and SDD not in parts:
        raise UnsafePath(f"{path} leaves {SDD}/")
    try:
        index = len(parts) - 1 - parts[::-1].index(SDD)
    except ValueError:
        return  # not in a project's .sdd/ (a user config file, a test's scratch file)
    top = Path(*parts[:index])
    link = _links_between(top, Path(*parts))
    if link is not None:
        raise UnsafePath(f"{link} is a symbolic link; the engine writes no file through it "
                         "(replace it with a real directory)")


def real_dir(path: Path) -> bool:
    """A directory itself, not a link to one (lstat)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def remove_tree(path: Path, base: Path, top: Path, what: str = "directory") -> None:
    """Remove a directory the engine created under `base`: refused unless it is inside
    `base`, nothing below `top` on the way is a link, and it is a real directory; links
    inside it are removed as links, never followed (shutil.rmtree's fd-based walk)."""
    rel = path.relative_to(base) if path.is_relative_to(base) else path
    target = within(base, rel, what=what, top=top)
    if not real_dir(target):
        if os.path.lexists(target):
            raise UnsafePath(f"{target} is not a real directory; not removed")
        return
    shutil.rmtree(target)


#: the directories under .sdd/ the engine writes or removes things in
ENGINE_DIRS = ("runtime", "runtime/gates", "runtime/heartbeats", "runtime/progress",
               "runtime/pids",
               "runtime/control/inbox", "runtime/control/outbox", "runtime/gate-logs",
               "backlog/open", "backlog/claimed", "backlog/closed", "archive", "metrics",
               "evolution", "caching", "caching/gates", "routing", "worktrees", "sandboxes")


def check_sdd_tree(root: Path) -> None:
    """UnsafePath naming the first of `.sdd/` or its engine directories that is a link."""
    for sub in ENGINE_DIRS:
        sdd_path(root, sub, what=f".sdd/{sub}")
