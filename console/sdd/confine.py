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
* only a real directory (by `lstat`, links never followed) is ever removed;
* files are moved, removed and read inside `.sdd/` through directory file descriptors
  (`SddDir`): each directory is opened from the project root one component at a time
  with `O_NOFOLLOW`, then `renameat`/`unlinkat`/`openat` act on the directories so
  opened, so a directory swapped for a link between a check and a move redirects
  nothing (the checks above are for paths handed on to others: git, subprocesses).

A refusal is one line: `UnsafeId` (a ValueError) for an id, `UnsafePath` (an
OSError, so every writer's existing `except OSError` reports it) for a path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
from pathlib import Path
from types import TracebackType

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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class SddDir:
    """A directory under `root/.sdd/`, held open: reached from the project root one
    component at a time (`openat` with `O_NOFOLLOW`, so no component is a link), then
    every read, move and removal in it names a file relative to the open descriptor.
    Swapping a directory for a link afterwards changes nothing we do: the descriptor
    still refers to the real directory. UnsafePath (one line) when a component is a link
    or not a directory; FileNotFoundError when one is missing and not `create`d."""

    def __init__(self, root: Path, *parts: str, create: bool = False,
                 what: str | None = None) -> None:
        self.display = "/".join((SDD, *parts))
        what = what or self.display
        for part in parts:
            if not part or part in (".", "..") or "/" in part or "\0" in part:
                raise UnsafePath(f"{what}: {brief(part)} is not a directory name")
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for index, part in enumerate((SDD, *parts)):  # _step closes the one it opens in
            fd = self._step(fd, part, "/".join((SDD, *parts)[:index + 1]), what, create)
        self.fd = fd
        self.path = root.joinpath(SDD, *parts)

    @classmethod
    def of(cls, path: Path, *, create: bool = False, what: str | None = None) -> SddDir:
        """The directory `path`, which must be inside a project's `.sdd/` (the last one
        on the way), opened as above."""
        parts = Path(os.path.normpath(path)).parts
        if SDD not in parts:
            raise UnsafePath(f"{path} is not inside a {SDD}/ directory")
        index = len(parts) - 1 - parts[::-1].index(SDD)
        return cls(Path(*parts[:index]), *parts[index + 1:], create=create, what=what)

    @staticmethod
    def _step(parent: int, name: str, shown: str, what: str, create: bool) -> int:
        """`name` opened in `parent` (closed either way), made first when `create`."""
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=parent)
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) and _is_link(parent,
                                                                                   name):
                raise UnsafePath(f"{shown} is a symbolic link; refusing to follow it for "
                                 f"{what} (replace it with a real directory)") from None
            if exc.errno == errno.ENOTDIR:
                raise UnsafePath(f"{shown} is not a directory; nothing done for {what}"
                                 ) from None
            raise
        finally:
            os.close(parent)

    def __enter__(self) -> SddDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry itself (a link is not followed); None when there is none."""
        try:
            return os.stat(_leaf(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def is_file(self, name: str) -> bool:
        """A regular file itself (not a link to one)."""
        info = self.lstat(name)
        return info is not None and stat.S_ISREG(info.st_mode)

    def read(self, name: str, limit: int) -> tuple[bytes | None, str | None]:
        """A whole regular file of at most `limit` bytes: (bytes, None), (None, reason),
        or (None, None) when it is missing. A link is refused unread, and a FIFO or a
        device never blocks the reader (O_NOFOLLOW | O_NONBLOCK, then fstat)."""
        try:
            fd = os.open(_leaf(name), _FILE_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                return None, "is a symbolic link; not read (replace it with the file itself)"
            return None, f"cannot open: {exc.strerror or exc}"
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, "is not a regular file; not read"
            if info.st_size > limit:
                return None, f"is {info.st_size} bytes, over the {limit}-byte limit"
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                chunk = os.read(fd, limit + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:  # it grew while being read
                return None, f"is over the {limit}-byte limit"
            return b"".join(chunks), None
        except OSError as exc:
            return None, f"cannot read: {exc.strerror or exc}"
        finally:
            os.close(fd)

    def move(self, name: str, target: SddDir, new_name: str) -> None:
        """`name` here becomes `new_name` in `target` (renameat: the entry itself, never
        what a link points to). FileExistsError when `new_name` is taken."""
        if target.exists(new_name):
            raise FileExistsError(errno.EEXIST, f"{target.display}/{new_name} exists")
        os.rename(_leaf(name), _leaf(new_name), src_dir_fd=self.fd, dst_dir_fd=target.fd)

    def unlink(self, name: str, *, missing_ok: bool = True) -> None:
        try:
            os.unlink(_leaf(name), dir_fd=self.fd)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def write(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """`name` replaced at once by `data` (a new file written, fsynced, renamed over
        it), all inside this directory: never through a link."""
        tmp = f".{_leaf(name)}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=self.fd)
        try:
            try:
                os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(self.fd)


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _leaf(name: str) -> str:
    """One entry of a directory: no separator, not `.` or `..`, no NUL."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(f"{brief(name)} is not a file name")
    return name
