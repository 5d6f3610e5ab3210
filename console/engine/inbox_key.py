"""Only the operator drives the engine: the control inbox's key and signatures.

Anything that can write the project can write a file into
`.sdd/runtime/control/inbox/` — an agent does, running in its worktree. So each
engine, when it starts, makes a secret of its own (32 random bytes) outside every
project: `$XDG_STATE_HOME/bernstein-tui/engine-keys/<sha256 of the project's real
path>.key`, mode 0600 in a 0700 directory, made anew by each engine (written whole to
a temporary file, O_EXCL | O_NOFOLLOW, and renamed into place) and removed when it
stops. Our CLI, console and `web` (InboxControl) read it and sign each request:
HMAC-SHA256 over the request's canonical JSON (sorted keys, no spaces, ASCII), its `id`,
`requested_at` and `expires_at` (the moment its sender stops waiting) included. The
engine carries out a request only when its signature holds with this engine's key, its
id is its file's name, it is at most MAX_AGE_S old (and not from the future), its
sender still waits for it (not past its expires_at), and its id was not seen before;
any other is answered with a refusal, logged in one line naming the file, and not
carried out. So a signed request an agent copies out of the inbox is worth nothing once
its sender has said "nothing was done".

Limits: the key keeps out whatever can write the project but cannot read this user's
files outside it. An agent process that runs as the same user, unsandboxed, and reads
`~/.local/state` can read the key and sign requests: the signature is no sandbox.
A root process can too.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from console.sdd.confine import is_safe_id
from console.sdd.fields import brief
from console.sdd.user_dirs import private_dir, project_key, user_state_dir

KEY_BYTES = 32
MAX_AGE_S = 300.0  # a request older than this is refused (stale)
MAX_AHEAD_S = 30.0  # and one dated further ahead than this
MAX_REQUEST_BYTES = 64 * 1024
SIGNATURE = "signature"
_DOMAIN = b"bernstein-tui control request v1\0"
_REPLY_DOMAIN = b"bernstein-tui control reply v1\0"


class KeyRefused(OSError):
    """The key file is there but cannot be trusted (a link, anyone else's, readable by
    others, too long): one line saying which."""


class KeyNotReady(FileNotFoundError):
    """The key file is shorter than a key: not written yet (an engine of an older version
    wrote it in place), so "not yet", like no file at all."""


def key_dir() -> Path:
    return user_state_dir() / "engine-keys"


def key_file(root: Path) -> Path:
    """Where the engine of the project at `root` keeps its key (by its real path)."""
    return key_dir() / f"{project_key(root)}.key"


def _private_key_dir() -> Path:
    directory = private_dir(key_dir())
    info = os.lstat(directory)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise KeyRefused(f"{directory} is not a directory only this user may enter; "
                         "no key kept there")
    return directory


def make_key(root: Path) -> bytes:
    """A new key for the engine starting on `root` (the old one, a dead engine's, goes);
    OSError when it cannot be made. Written whole to a temporary file (0600, O_EXCL |
    O_NOFOLLOW, in the same 0700 directory) and renamed into place: a reader sees the old
    key or the new one, never a missing or half-written one."""
    path = key_file(root)
    directory = os.open(_private_key_dir(), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                        | os.O_CLOEXEC)
    try:
        key = secrets.token_bytes(KEY_BYTES)
        temporary = f".{path.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600, dir_fd=directory)
        try:
            try:
                os.fchmod(fd, 0o600)
                if os.write(fd, key) != KEY_BYTES:
                    raise OSError(f"{path}: short write of the engine's key")
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise
        with contextlib.suppress(OSError):
            os.fsync(directory)
    finally:
        os.close(directory)
    return key


def drop_key(root: Path, key: bytes) -> None:
    """The engine stops: its key goes (unless another engine's replaced it already)."""
    with contextlib.suppress(OSError):
        if read_key(root) == key:
            os.unlink(key_file(root))


def read_key(root: Path) -> bytes:
    """The running engine's key; FileNotFoundError when there is none (yet) — KeyNotReady
    when the file is shorter than a key —, KeyRefused (one line) when the file is not one
    only this user can read."""
    path = key_file(root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyRefused(f"{path}: cannot open the engine's key: {exc.strerror or exc}"
                         ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise KeyRefused(f"{path} is not a regular file of this user's; not used")
        if info.st_mode & 0o077:
            raise KeyRefused(f"{path} can be read by others (mode "
                             f"{stat.S_IMODE(info.st_mode):o}); not used")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) < KEY_BYTES:
        raise KeyNotReady(f"{path} holds {len(key)} bytes, not a whole key (yet)")
    if len(key) != KEY_BYTES:
        raise KeyRefused(f"{path} is not a key (over {KEY_BYTES} bytes); not used")
    return key


def canonical(request: Mapping[str, object]) -> bytes:
    """What is signed: every field but the signature, as sorted, compact, ASCII JSON."""
    body = {k: v for k, v in request.items() if k != SIGNATURE}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def signature(key: bytes, request: Mapping[str, object]) -> str:
    return hmac.new(key, _DOMAIN + canonical(request), "sha256").hexdigest()


def sign(key: bytes, request: Mapping[str, object]) -> dict[str, object]:
    return {**request, SIGNATURE: signature(key, request)}


def reply_signature(key: bytes, name: str, reply: Mapping[str, object]) -> str:
    """The engine signs its answers too (another domain, bound to the request's file
    name), so a reply an agent writes is never taken for the engine's."""
    body = {k: v for k, v in reply.items() if k != SIGNATURE}
    encoded = json.dumps([name, body], sort_keys=True, separators=(",", ":"),
                         ensure_ascii=True).encode("ascii")
    return hmac.new(key, _REPLY_DOMAIN + encoded, "sha256").hexdigest()


def reply_holds(key: bytes, name: str, reply: Mapping[str, object]) -> bool:
    given = reply.get(SIGNATURE)
    try:
        expected = reply_signature(key, name, reply)
    except (TypeError, ValueError, RecursionError):
        return False
    return isinstance(given, str) and hmac.compare_digest(
        given.encode("utf-8", "replace"), expected.encode())


class Verifier:
    """The engine's side: which requests it carries out (signed with its key, fresh, not
    seen before); ids are remembered as long as their requests would still be fresh."""

    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self.key = key
        self.clock = clock
        self.seen: dict[str, float] = {}

    def refusal(self, name: str, request: Mapping[str, object]) -> str | None:
        """None when `request` (read from inbox file `name`) may be carried out, else
        why not, in one line."""
        given = request.get(SIGNATURE)
        if not isinstance(given, str) or not given:
            return ("not signed: only the operator's own tools (bernstein-tui's CLI, "
                    "console and web) may drive the engine")
        try:
            expected = signature(self.key, request)
        except (TypeError, ValueError, RecursionError):
            return "not signed by this engine's key (a value cannot be encoded)"
        if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode()):
            return "signature does not match this engine's key (forged, or for another engine)"
        request_id = request.get("id")
        if not is_safe_id(request_id) or name != f"{request_id}.json":
            return f"id {brief(request_id)} is not the file's name"
        made = request.get("requested_at")
        if isinstance(made, bool) or not isinstance(made, int | float):
            return "no requested_at"
        expires = request.get("expires_at")
        if isinstance(expires, bool) or not isinstance(expires, int | float):
            return "no expires_at (made by an older bernstein-tui? send it again)"
        now = self.clock()
        if made < now - MAX_AGE_S:
            return f"stale: made {now - made:.0f} s ago (a request is valid {MAX_AGE_S:.0f} s)"
        if made > now + MAX_AHEAD_S:
            return "dated in the future"
        if expires < now:
            return (f"expired {now - expires:.0f} s ago: its sender stopped waiting "
                    "and was told nothing was done")
        self.seen = {k: t for k, t in self.seen.items() if t >= now - MAX_AGE_S - MAX_AHEAD_S}
        if str(request_id) in self.seen:
            return f"replayed: request {request_id} was already received"
        self.seen[str(request_id)] = float(made)
        return None
