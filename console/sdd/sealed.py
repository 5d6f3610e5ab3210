"""Files sealed with this user's key: magic bytes, a MAC, then the body.

The MAC is HMAC-SHA256 over a schema (what version of what wrote the body) and the
body, made with a key only this user can read (`$XDG_STATE_HOME/bernstein-tui/
checkpoint.key`, 0600, made on first use). What a body holds came from a project's
files, which are anyone's to write, and a cache can be anyone's copy, so a body is
trusted only when its MAC holds: one written by anyone else, by another schema, or
damaged is refused whole, before any of it is decoded (a crafted body could be a memory
bomb). SHA-256 rather than BLAKE2b for its speed where the CPU has SHA
instructions: 2x on these machines.

A sealed file is read and MAC'd at once: a thread reads the next megabytes while the
MAC takes in the last (both run without the GIL), so a 40 MB checkpoint costs the
longer of the two, ~20 ms here, not their sum.
"""

from __future__ import annotations

import contextlib
import hmac
import mmap
import os
import queue
import secrets
import threading
from pathlib import Path

from console.sdd.user_dirs import user_state_dir

MAC_BYTES = 32
CHUNK_BYTES = 4 * 1024 * 1024  # read, then MAC'd, at a time


def key_path() -> Path:
    return user_state_dir() / "checkpoint.key"


def user_key(create: bool) -> bytes | None:
    """This user's key (made on first use when `create`, readable by them alone)."""
    path = key_path()
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            key = handle.read(64)
        if len(key) == 32 and (os.stat(path).st_mode & 0o077) == 0:
            return key
        if not create:
            return None
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        os.chmod(path, 0o600)
        return key
    except OSError:
        return None


def mac(key: bytes, body: bytes | memoryview, schema: bytes) -> bytes:
    """HMAC-SHA256 of `schema` and `body` (MAC_BYTES long)."""
    sealer = hmac.new(key, schema, "sha256")
    sealer.update(body)
    return sealer.digest()


def read_sealed(path: Path, magic: bytes, schema: bytes, limit: int) -> memoryview | None:
    """The body of `path` when it is `magic`, a MAC and a body the MAC (this user's key,
    `schema`) holds for; None when it is missing, a symbolic link, over `limit` bytes,
    short, damaged or anyone else's, or there is no key."""
    key = user_key(create=False)
    if key is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        head = len(magic) + MAC_BYTES
        if not head <= size <= limit:
            return None
        # (anonymous memory, filled by the read: no zeroing first, and no file behind it
        # that another process could cut short under us)
        data = memoryview(mmap.mmap(-1, size))
        sealer = hmac.new(key, schema, "sha256")
        if _read_macing(fd, data, head, sealer) != size:
            return None
    finally:
        os.close(fd)
    if data[:len(magic)] != magic or not hmac.compare_digest(
            data[len(magic):head], sealer.digest()):
        return None
    return data[head:]


def _read_macing(fd: int, data: memoryview, start: int, sealer: hmac.HMAC) -> int:
    """Fill `data` from `fd`, the bytes from `start` on into `sealer` as they come (a
    thread reads ahead); how many bytes were read (fewer: the file was cut short)."""
    ends: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    reader = threading.Thread(target=_read_into, args=(fd, data, ends), daemon=True)
    reader.start()
    done = start
    read = 0
    try:
        while (end := ends.get()) is not None:
            read = end
            if end > done:
                sealer.update(data[done:end])
                done = end
    finally:
        reader.join()  # (before the caller closes the fd it reads)
    return read


def _read_into(fd: int, data: memoryview, ends: queue.SimpleQueue[int | None]) -> None:
    offset = 0
    try:
        while offset < len(data):
            count = os.preadv(fd, [data[offset:offset + CHUNK_BYTES]], offset)
            if count <= 0:
                break
            offset += count
            ends.put(offset)
    except OSError:
        pass
    finally:
        ends.put(None)
