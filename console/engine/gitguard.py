"""What agents write into the shared repository's git metadata does not outlive their run.

An agent gets a worktree and may run git there, so it can write the config, hooks and
attributes of the project's repository; the operator's own git would run them later.
The guard keeps a copy of those files from before the first of the attempts running
at once, and puts back whatever differs (contents, new and removed files) before every
step the engine takes after an agent ran (its commit, the landing's fetch, merge and
push: `check`) and when an attempt ends (`end`), returning one line that names what
was changed. A worktree's own admin files (`config.worktree`, `info/attributes` under
`.git/worktrees/<name>/`) do not exist when the engine makes it: `clear` removes them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path

from console.sdd.repo_config import parse

GUARDED = ("config", "config.worktree", "info/attributes")
#: what an agent could add under its worktree's admin dir for its worktree's git to read
WORKTREE_OWN = ("config.worktree", "info/attributes")
HOOKS = "hooks"
MAX_FILE = 4 * 1024 * 1024


State = tuple[str, int, bytes]  # ("file" | "link", mode, contents or link target)


def _state(path: Path) -> State | None:
    try:
        info = path.lstat()
        if path.is_symlink():
            return ("link", 0, os.fsencode(os.readlink(path)))
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            return ("file", info.st_mode & 0o7777, handle.read(MAX_FILE))
    except OSError:
        return None


def _data(state: State | None) -> bytes | None:
    return state[2] if state is not None and state[0] == "file" else None


def _keys(data: bytes | None) -> dict[str, tuple[str, ...]]:
    """A config file's settings, parsed by git itself (no includes followed)."""
    found: dict[str, list[str]] = {}
    for key, value in (parse(data) or []) if data else []:
        found.setdefault(key, []).append(value)
    return {k: tuple(v) for k, v in found.items()}


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _descend(fd: int, parts: list[str] | tuple[str, ...]) -> int:
    """A new descriptor for the directory `parts…` below the open directory `fd` (which
    stays open), each part opened with O_NOFOLLOW: OSError when one is a link or none."""
    current = os.dup(fd)
    for part in parts:
        try:
            step = os.open(part, _DIR_FLAGS, dir_fd=current)
        finally:
            os.close(current)
        current = step
    return current


def _open_dirs(top: Path, *parts: str) -> int:
    """`top/parts…` opened as a directory: `top` as it is (the engine's own git dir),
    each part below it never through a link."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _descend(fd, parts)
    finally:
        os.close(fd)


def _unlink_at(fd: int, name: str) -> bool:
    """Remove `name` (`a/b`: b in a, a reached never through a link) below the open
    directory `fd`: the entry itself, never a link's target. Whether there was one."""
    *dirs, leaf = name.split("/")
    try:
        where = _descend(fd, dirs)
    except OSError:
        return False  # no such directory, or a link there: nothing removed through it
    try:
        os.stat(leaf, dir_fd=where, follow_symlinks=False)
    except OSError:
        return False
    else:
        with contextlib.suppress(OSError):
            os.unlink(leaf, dir_fd=where)
        return True
    finally:
        os.close(where)


class GitMetaGuard:
    """Snapshot before the first concurrent attempt, restore after each one ends."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._lock = threading.Lock()
        self._active = 0
        self._saved: dict[str, State | None] = {}

    def _files(self) -> set[str]:
        names = set(GUARDED)
        hooks = self.git_dir / HOOKS
        if hooks.is_symlink():
            return names  # never listed through a link (see _unlink_dirs)
        with contextlib.suppress(OSError):
            names |= {f"{HOOKS}/{p.name}" for p in hooks.iterdir()
                      if p.is_symlink() or p.is_file()}
        return names

    def begin(self) -> None:
        with self._lock:
            if self._active == 0:
                self._saved = {name: _state(self.git_dir / name) for name in self._files()}
            self._active += 1

    def end(self) -> str | None:
        """Restore what changed; the one line saying so, or None when nothing did."""
        with self._lock:
            self._active = max(0, self._active - 1)
            return self._put_back()

    def check(self) -> str | None:
        """While attempts run: restore what changed since the snapshot (before a step
        the engine takes after an agent ran); the line saying so, or None."""
        with self._lock:
            return self._put_back() if self._active else None

    def clear(self, admin: Path) -> str | None:
        """Remove the files an agent may have added to its worktree's own admin dir
        (`admin` is `.git/worktrees/<name>`); the line saying so, or None. The dir is
        reached from the git dir one component at a time, never through a link, and
        each file is removed by name in the directory held open: a `worktrees/` or
        `<name>/` swapped for a link meanwhile cannot redirect the removal."""
        shown = f"worktrees/{admin.name}"
        try:
            fd = _open_dirs(self.git_dir, "worktrees", admin.name)
        except FileNotFoundError:
            return None
        except OSError:
            return (f"an agent changed its worktree's git metadata ({shown} is not a plain "
                    "directory); nothing removed through it")
        said: list[str] = []
        try:
            for name in WORKTREE_OWN:
                if _unlink_at(fd, name):
                    said.append(f"{shown}/{name} added")
        finally:
            os.close(fd)
        if not said:
            return None
        return ("an agent changed its worktree's git metadata (" + "; ".join(said)
                + "); removed")

    def _put_back(self) -> str | None:
        """Under the lock: put back what differs from the snapshot."""
        changed = self._unlink_dirs()
        for name in sorted(self._files() | set(self._saved)):
            before = self._saved.get(name)
            now = _state(self.git_dir / name)
            if now == before:
                continue
            changed.append(self._describe(name, before, now))
            self._restore(self.git_dir / name, before)
        if not changed:
            return None
        return ("an agent changed the repository's git metadata (" + "; ".join(changed)
                + "); put back as it was before the run")

    def _unlink_dirs(self) -> list[str]:
        """hooks/ or info/ turned into a link (to the operator's home, say): the link goes
        and a real directory takes its place, so nothing is restored or removed through it."""
        said = []
        for name in (HOOKS, "info"):
            path = self.git_dir / name
            if path.is_symlink():
                with contextlib.suppress(OSError):
                    path.unlink()
                    path.mkdir()
                said.append(f"{name}/ was made a link")
        return said

    @staticmethod
    def _describe(name: str, before: State | None, now: State | None) -> str:
        if name.startswith("config"):
            old, new = _keys(_data(before)), _keys(_data(now))
            keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            shown = ", ".join(keys[:12]) + (", …" if len(keys) > 12 else "")
            return f"{name}: {shown or 'rewritten'}"
        if before is None:
            return f"{name} added"
        return f"{name} removed" if now is None else f"{name} changed"

    @staticmethod
    def _restore(path: Path, before: State | None) -> None:
        with contextlib.suppress(OSError):
            kind, mode, data = before or ("none", 0, b"")
            if kind != "file" and (path.is_symlink() or path.is_file()):
                path.unlink()  # the agent's file or link goes, never a link's target
            if before is None:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "link":
                os.symlink(os.fsdecode(data), path)
                return
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, path)  # at once, and over a link the agent put there
