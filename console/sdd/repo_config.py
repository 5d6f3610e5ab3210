"""The repository's git config as data (DESIGN §7), for the trust hash and for saying
what it can run or steer.

Two sets of settings. `runnable` lists every one that names a program git runs or
steers where its data goes (_RUNS: hooks path, fsmonitor, pager, drivers, credential
and signing programs, remotes' URLs and upload/receive programs, …): the operator's
own git would run them, so the trust dialog shows them all. `digest` hashes only
those that still steer the engine's git despite its overrides (_STEERS: URL rewriting
by `insteadOf`/`pushInsteadOf`, http and remote proxies, certificates, cookie files
and extra headers, and includes, which the engine refuses anyway): everything else
in _RUNS the engine switches off or names itself on every command (console/engine/
safegit.py, shared_remote.py), so a `git remote add`, husky's `core.hooksPath` or
scalar's `core.fsmonitor` changes nothing the engine runs and needs no new trust.

Its files are read as bytes with a size limit, without blocking on a FIFO, and parsed
by git itself (`git config --file - --list -z --no-includes` on the bytes read: git's
own parser, given no repository, following nothing and running nothing). Includes
are followed here only while they stay inside the project or its git directory
(a chain of at most MAX_DEPTH); one that leads elsewhere is hashed as its path and
named as not read.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from console.sdd.fileio import read_regular_file

CONFIG_MAX = 1024 * 1024
MAX_DEPTH = 10  # git's own limit on nested includes
MAX_FILES = 64  # config files and includes read, in all
#: settings that name a program git runs, or steer where its data goes
_RUNS = re.compile(
    r"^(core\.(fsmonitor|hookspath|sshcommand|gitproxy|pager|editor|askpass|worktree"
    r"|attributesfile|alternaterefscommand)|sequence\.editor|diff\.external"
    r"|credential\.(.+\.)?helper|gpg\.(.+\.)?program|gpg\.ssh\.defaultkeycommand"
    r"|filter\..+\.(clean|smudge|process)|diff\..+\.(command|textconv)"
    r"|merge\..+\.driver|remote\..+\.(url|pushurl|uploadpack|receivepack|vcs|proxy)"
    r"|url\..+\.(insteadof|pushinsteadof)|include\.path|includeif\..+\.path|pager\..+"
    r"|alias\..+|trailer\..+\.(command|cmd)|(merge|diff)tool\..+\.cmd"
    r"|interactive\.difffilter|uploadpack\.packobjectshook|submodule\..+\.update"
    r"|http\.(.+\.)?(proxy|sslverify|sslcainfo|sslcapath|sslcert|sslkey|cookiefile"
    r"|extraheader|curloptresolve))$", re.DOTALL)
#: of those, what steers the engine's own git although it overrides the rest: hashed
_STEERS = re.compile(
    r"^(url\..+\.(insteadof|pushinsteadof)|remote\..+\.proxy|include\.path"
    r"|includeif\..+\.path|http\.(.+\.)?(proxy|sslverify|sslcainfo|sslcapath|sslcert"
    r"|sslkey|cookiefile|extraheader|curloptresolve))$", re.DOTALL)


def is_include(key: str) -> bool:
    """Whether the config key `key` includes another file (`include.path`,
    `includeIf.<condition>.path`)."""
    low = key.lower()
    return low == "include.path" or (low.startswith("includeif.") and low.endswith(".path"))


def parse(data: bytes) -> list[tuple[str, str]] | None:
    """A config file's settings in order (key lowercased as git prints it), or None
    when git cannot parse it (or cannot run)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "HOME": os.devnull, "GIT_CEILING_DIRECTORIES": os.sep}
    try:
        done = subprocess.run(["git", "config", "--file", "-", "--list", "-z",
                               "--no-includes"], input=data, cwd=os.sep, env=env,
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    out = []
    for entry in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            out.append((key, value))
    return out


def _read(path: Path) -> tuple[bytes | None, str]:
    """(contents, "") or (None, why not): a regular file, at most CONFIG_MAX bytes."""
    data, problem = read_regular_file(path, str(path), CONFIG_MAX)
    if problem is not None:
        return None, problem.reason
    return (None, "absent") if data is None else (data, "")


def git_dir(root: Path) -> Path | None:
    """The repository's common git directory as git would find it from `root` (a `.git`
    directory, or a `.git` file's `gitdir:` and that dir's `commondir`)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    data, _ = _read(dot)
    if data is None or not data.startswith(b"gitdir: "):
        return None
    where = (root / os.fsdecode(data[8:].strip())).resolve()
    common, _ = _read(where / "commondir")
    return (where / os.fsdecode(common.strip())).resolve() if common else where


@dataclass(frozen=True, slots=True)
class ConfigFile:
    shown: str  # its path as the operator reads it (relative to the project when inside)
    path: Path
    settings: list[tuple[str, str]] | None  # None: absent, unreadable or unparseable
    data: bytes | None
    problem: str = ""  # why it is not read ("absent", "outside the project", …)


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def config_files(root: Path) -> Iterator[ConfigFile]:
    """The repository's config files and the includes they lead to, each once."""
    real = root.resolve()
    common = git_dir(real)
    if common is None:
        return
    allowed = (real, common.resolve())
    queue = [(common / "config", 0), (common / "config.worktree", 0)]
    seen: set[Path] = set()
    while queue:
        path, depth = queue.pop(0)
        if len(seen) >= MAX_FILES:
            yield ConfigFile(_shown(path, real), path, None, None,
                             f"past {MAX_FILES} included files: not read")
            return
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        shown = _shown(path, real)
        if depth and not any(resolved.is_relative_to(top) for top in allowed):
            yield ConfigFile(shown, path, None, None, "outside the project: not read")
            continue
        data, problem = _read(path)
        if data is None:
            yield ConfigFile(shown, path, None, None, problem)
            continue
        settings = parse(data)
        yield ConfigFile(shown, path, settings, data, "" if settings is not None
                         else "git cannot parse it")
        for key, value in settings or ():
            if is_include(key) and value and depth < MAX_DEPTH:
                target = Path(os.path.expanduser(value)) if value.startswith("~") \
                    else path.parent / value
                queue.append((target, depth + 1))


def digest(root: Path) -> str:
    """The hash of what in the repository's config (and its includes) still steers the
    engine's git (_STEERS): each such setting with the file it is in, and any file git
    cannot parse (its raw bytes) or that is not read (why). What the engine overrides
    (hooks, fsmonitor, drivers, remotes' programs, …) and what git writes in ordinary
    work (a `git init`, `git remote add`, a tracking branch, the author) are left out:
    they need no new trust, and a project trusted before its `git init` stays trusted."""
    whole = hashlib.sha256()
    for found in config_files(root):
        if found.settings is not None:
            for key, value in found.settings:
                if _STEERS.match(key.lower()):
                    whole.update(os.fsencode(found.shown) + b"\0" + os.fsencode(key)
                                 + b"=" + os.fsencode(value) + b"\n")
        elif found.data is not None:
            whole.update(os.fsencode(found.shown) + b"\0bytes\0" + found.data + b"\n")
        elif found.problem != "absent":
            whole.update(os.fsencode(found.shown) + b"\0" + found.problem.encode() + b"\n")
    return whole.hexdigest()


def runnable(root: Path) -> list[str]:
    """What the repository's config names that can run a program or steer git, one line
    each (not yet sanitised)."""
    lines = []
    for found in config_files(root):
        if found.problem and found.problem != "absent":
            lines.append(f"git config {found.shown}: {found.problem}")
        for key, value in found.settings or ():
            if not _RUNS.match(key.lower()):
                continue
            note = " (the engine runs no git here while it is there)" if is_include(key) \
                else "" if _STEERS.match(key.lower()) or key.startswith("remote.") \
                else " (the engine's git never runs it; your own git does)"
            lines.append(f"git config {found.shown}: {key} = {value}{note}")
    return lines
