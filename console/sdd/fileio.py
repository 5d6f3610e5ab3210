"""The only ways anything in the project writes `.sdd/`, and whole-file reads.

* `atomic_write_*`: temp file in the same directory + fsync + rename (+ fsync of
  the directory), so a reader sees the old file or the new one, never half.
* `append_jsonl`: whole lines appended under an exclusive `flock`, in one write.
  If a crashed writer left a half line at the end, it is closed with a newline
  first, so the torn bytes become one bad line instead of corrupting ours.
* `read_log_tail`: the last 64 KiB of an agent log, for the detail pane.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from console.model import Problem
from console.sdd.confine import UnsafePath, check_write_path, within

MAX_JSON_FILE_BYTES = 16 * 1024 * 1024


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes | bytearray, *, mode: int | None = None
                       ) -> None:
    """`mode` (e.g. 0o600 for a private file) wins; else the old file's, else 0644."""
    import tempfile  # (3 ms to import: not on a start's read path)

    check_write_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode) if mode is None else mode
        except OSError:
            mode = 0o644  # mkstemp's 0600 would hide the file from other readers
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    """Bernstein writes its JSON state files with sorted keys and indent 2."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def encode_line(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode()


def append_jsonl(path: Path, records: Iterable[Mapping[str, Any]], *, fsync: bool = True) -> int:
    """Append whole JSON lines under an exclusive lock; returns the bytes written.

    A write that fails part-way (a full disk, a quota, an I/O error) is rolled back to
    the size the file had, so no torn line is left behind; the OSError is raised."""
    payload = b"".join(encode_line(r) for r in records)
    if not payload:
        return 0
    check_write_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # freeing blocks works on a full disk too
            raise
    finally:
        os.close(fd)  # closing releases the flock
    return len(payload)


def read_regular_file(path: Path, display: str, limit: int, *, follow: bool = True
                      ) -> tuple[bytes | None, Problem | None]:
    """A whole regular file of at most `limit` bytes: (bytes, None) or (None, problem).

    A missing file is (None, None). Opened non-blocking, so a FIFO never hangs a reader;
    not `follow`: a file that is a symbolic link is refused unread (a ticket).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
                     | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            return None, Problem(display, None, "is a symbolic link; not read (replace it "
                                                "with the file itself)")
        return None, Problem(display, None, f"cannot open: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return None, Problem(display, None, "is a directory, expected a file")
        if not stat.S_ISREG(info.st_mode):
            return None, Problem(display, None, "is not a regular file")
        if info.st_size > limit:
            return None, Problem(display, None,
                                 f"is {info.st_size} bytes, over the {limit}-byte limit")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit + 1), None
    except OSError as exc:
        return None, Problem(display, None, f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)


def read_json_object(path: Path, display: str) -> tuple[dict[str, Any] | None, Problem | None]:
    """A whole JSON file that must hold one object: (object, None) or (None, problem).

    A missing file is (None, None): absence is not a problem.
    """
    data, problem = read_regular_file(path, display, MAX_JSON_FILE_BYTES)
    if data is None:
        return None, problem
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, Problem(display, None, f"invalid UTF-8 at byte {exc.start + 1}")
    except json.JSONDecodeError as exc:
        return None, Problem(display, exc.lineno, f"invalid JSON: {exc.msg}")
    except RecursionError:
        return None, Problem(display, None, "invalid JSON: nested too deeply")
    if not isinstance(value, dict):
        return None, Problem(display, None, f"expected a JSON object, got {type(value).__name__}")
    return value, None


LOG_TAIL_BYTES = 64 * 1024


def read_tail(path: Path, limit: int) -> tuple[bytes, int]:
    """The last `limit` bytes of a regular file and its size, opened without blocking
    and without following a final link (a FIFO or a device never hangs the reader).
    OSError (ENOENT, ELOOP, "not a regular file") for the caller to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.pread(fd, limit, max(0, info.st_size - limit)), info.st_size
    finally:
        os.close(fd)


def read_log_tail(root: Path, log: str, limit: int = LOG_TAIL_BYTES) -> str:
    """The end of an agent log named by a task's `metadata.log` (relative to the project):
    only a regular file inside `.sdd/runtime/`, reached through no link, at most `limit`
    bytes read. Callers keep it off the event loop."""
    try:
        path = within(root / ".sdd" / "runtime", Path(log).relative_to(".sdd/runtime")
                      if Path(log).is_relative_to(".sdd/runtime") else log,
                      what="agent log", top=root)
    except (UnsafePath, ValueError) as exc:
        return f"(log not shown: {exc})"
    try:
        data, size = read_tail(path, limit)
    except FileNotFoundError as exc:
        return f"(no log yet: {exc.strerror or exc})"
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return "(log not shown: metadata.log is not a regular file)"
        if exc.errno == errno.ELOOP:
            return f"(log not shown: {log} is a symbolic link)"
        return f"(log not readable: {exc.strerror or exc})"
    text = data.decode("utf-8", errors="replace")
    return (f"… {size - limit} earlier bytes not shown\n" if size > limit else "") + text


#: what says a whole file is unchanged since it was read (here and in a checkpoint): its
#: device, inode, size, mtime, ctime and mode. The ctime because the mtime is anyone's to
#: set (os.utime): a file rewritten in place to the same size with its mtime put back
#: still has a new ctime, which only the kernel sets.
Signature = tuple[int, int, int, int, int, int]


def file_signature(info: os.stat_result) -> Signature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
            info.st_mode)
