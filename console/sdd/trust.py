"""Workspace trust (DESIGN §7): a project's code runs only once the operator trusts it,
the way git's `safe.directory`, direnv's `allow` and VS Code's Workspace Trust work.

What is recorded, per project: its real path (resolved) and a hash of everything in
it that configures code to run —

* `bernstein.yaml` (agent commands, gate tools and commands, evolution commands): the
  bytes the engine reads, and the link's target text when it is a link;
* everything under `.bernstein/` (gate plugins are imported in-process): every name,
  its kind and its contents, in a stable order; a symbolic link is hashed as the link
  (its target text), never followed — and the plugin loader refuses links, so what is
  hashed is what runs.

* the repository's git config (`.git/config`, `config.worktree` and the includes they
  lead to inside the project, console.sdd.repo_config): the settings that still steer
  the engine's git despite its overrides (`insteadOf`/`pushInsteadOf`, http and remote
  proxies, certificates, cookie files and extra headers, includes). Hooks, fsmonitor,
  drivers, pager, editor, credential and signing programs, remotes' URLs and their
  upload/receive programs are overridden or named by the engine on every git it runs:
  they are listed (the operator's own git runs them), not hashed, so `git remote add`,
  husky's `core.hooksPath` or what `git init` writes need no new trust;
* the role templates (`templates/`, and the `roles_dir` bernstein.yaml names when it
  is elsewhere in the project): they pick each role's model and system prompt.

`.sdd/config.yaml` is not hashed: nothing in it runs code (Bernstein's server port and
runtime knobs). Tickets are work, not configuration: their `test_passes` commands and
`api_responds` URLs run only in a trusted project's engine.

The record lives in `$XDG_CONFIG_HOME/bernstein-tui/trust.json` (`~/.config/...`),
written atomically with mode 0600 under a lock, read with a size cap; a damaged file
means "nothing trusted" and says so in one line (it is kept as `trust.json.damaged`
when `trust` writes a new one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from console.sdd import repo_config
from console.sdd.fileio import atomic_write_bytes, read_regular_file
from console.sdd.role_templates import role_lines, roles_dir
from console.sdd.sanitize import display_text
from console.sdd.user_dirs import user_config_dir

TRUST_FILE_MAX_BYTES = 4 * 1024 * 1024
CONFIG_MAX_BYTES = 1024 * 1024  # load_config's own cap: hashed exactly as it is read
MAX_ENTRIES = 10_000  # under .bernstein/
MAX_HASHED_BYTES = 256 * 1024 * 1024
PARTS = ("bernstein.yaml", ".bernstein/", ".sdd/missions/", ".git/config", "templates/")


class TrustError(Exception):
    """The project cannot be fingerprinted or the trust file written: one line."""


def trust_file() -> Path:
    return user_config_dir() / "trust.json"


def trust_command(root: Path) -> str:
    return f"bernstein-tui -C {display_text(str(root))} trust"


# -- the fingerprint -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fingerprint:
    parts: dict[str, str]  # PARTS → sha256 hex

    @property
    def digest(self) -> str:
        whole = hashlib.sha256()
        for name in PARTS:
            whole.update(f"{name}\0{self.parts[name]}\n".encode())
        return whole.hexdigest()


class _Budget:
    def __init__(self) -> None:
        self.entries = 0
        self.bytes = 0

    def spend(self, entries: int = 0, size: int = 0) -> None:
        self.entries += entries
        self.bytes += size
        if self.entries > MAX_ENTRIES:
            raise TrustError(f".bernstein/ holds over {MAX_ENTRIES} entries: too many to trust")
        if self.bytes > MAX_HASHED_BYTES:
            raise TrustError(f".bernstein/ holds over {MAX_HASHED_BYTES >> 20} MiB: too much "
                             "to trust")


def _file_digest(path: Path, budget: _Budget) -> str:
    """A regular file's contents, opened without following a link or blocking on a FIFO."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return "changed-while-hashed"
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            budget.spend(size=len(chunk))
            digest.update(chunk)
    return digest.hexdigest()


def _entry(path: Path, info: os.stat_result, budget: _Budget) -> str:
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return "link " + os.readlink(path)
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        executable = "x" if mode & 0o111 else "-"
        return f"file {executable} {_file_digest(path, budget)}"
    return f"other {stat.S_IFMT(mode):o}"  # a FIFO, socket or device: never opened


def _walk(directory: Path, rel: str, budget: _Budget) -> Iterator[tuple[str, str]]:
    with os.scandir(directory) as scan:
        names = sorted((entry.name for entry in scan), key=os.fsencode)
    budget.spend(entries=len(names))
    for name in names:
        path = directory / name
        info = os.lstat(path)
        here = f"{rel}/{name}"
        yield here, _entry(path, info, budget)
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(path, here, budget)


def _tree_digest(root: Path, rel: str = ".bernstein") -> str:
    digest = hashlib.sha256()
    top = root / rel
    try:
        info = os.lstat(top)
    except FileNotFoundError:
        return hashlib.sha256(b"absent").hexdigest()
    budget = _Budget()
    entries = [(rel, _entry(top, info, budget))]
    if stat.S_ISDIR(info.st_mode):
        entries += _walk(top, rel, budget)
    for name, what in entries:
        digest.update(os.fsencode(name) + b"\0" + os.fsencode(what) + b"\n")
    return digest.hexdigest()


def _config_digest(root: Path) -> str:
    path = root / "bernstein.yaml"
    digest = hashlib.sha256()
    with contextlib.suppress(OSError):
        if path.is_symlink():
            digest.update(b"link " + os.fsencode(os.readlink(path)) + b"\n")
    data, problem = read_regular_file(path, "bernstein.yaml", CONFIG_MAX_BYTES)
    if problem is not None:
        digest.update(f"unreadable {problem.reason}".encode())
    elif data is None:
        digest.update(b"absent")
    else:
        digest.update(b"bytes\0" + data)
    return digest.hexdigest()


def _templates_digest(root: Path) -> str:
    """`templates/`, and the roles directory bernstein.yaml names when it is elsewhere."""
    digest = hashlib.sha256(_tree_digest(root, "templates").encode())
    roles = roles_dir(root)
    if roles is not None and not roles.startswith("templates/"):
        digest.update(f"\0{roles}\0{_tree_digest(root, roles)}".encode())
    return digest.hexdigest()


def fingerprint(root: Path) -> Fingerprint:
    """The hash of what can run code in `root`; TrustError when it cannot be taken."""
    try:
        # missions' notify channels make the engine POST to URLs: trusted like the rest
        return Fingerprint({"bernstein.yaml": _config_digest(root),
                            ".bernstein/": _tree_digest(root),
                            ".sdd/missions/": _tree_digest(root, ".sdd/missions"),
                            ".git/config": repo_config.digest(root),
                            "templates/": _templates_digest(root)})
    except OSError as exc:
        raise TrustError(f"cannot read {exc.filename or root}: {exc.strerror or exc}") from None


# -- the store -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    path: str
    digest: str
    parts: dict[str, str]
    trusted_at: float


def _parse(data: bytes) -> dict[str, Record]:
    raw = json.loads(data.decode("utf-8"))
    if not isinstance(raw, dict) or raw.get("version") != 1 \
            or not isinstance(raw.get("projects"), dict):
        raise ValueError("not a version-1 trust file")
    records = {}
    for path, entry in raw["projects"].items():
        if not (isinstance(entry, dict) and isinstance(entry.get("digest"), str)
                and isinstance(entry.get("parts"), dict)):
            raise ValueError(f"entry {path!r} is malformed")
        parts = {str(k): str(v) for k, v in entry["parts"].items()}
        when = entry.get("trusted_at")
        records[path] = Record(path, entry["digest"], parts,
                               float(when) if isinstance(when, int | float) else 0.0)
    return records


def load_records() -> tuple[dict[str, Record], str | None]:
    """Every trusted project, and a one-line warning when the trust file is damaged."""
    path = trust_file()
    data, problem = read_regular_file(path, str(path), TRUST_FILE_MAX_BYTES)
    if problem is not None:
        return {}, f"{path} {problem.reason}: nothing is trusted"
    if data is None:
        return {}, None
    try:
        return _parse(data), None
    except (ValueError, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, f"{path} is damaged ({display_text(reason)[:120]}): nothing is trusted"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    directory = user_config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(directory / "trust.json.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _save(records: dict[str, Record], damaged: bool) -> None:
    path = trust_file()
    if damaged:
        with contextlib.suppress(OSError):
            os.replace(path, path.with_name("trust.json.damaged"))
    body = {"version": 1, "projects": {
        r.path: {"digest": r.digest, "parts": r.parts, "trusted_at": r.trusted_at}
        for r in sorted(records.values(), key=lambda r: r.path)}}
    atomic_write_bytes(path, (json.dumps(body, indent=2) + "\n").encode(), mode=0o600)


def _change(edit: Callable[[dict[str, Record]], object]) -> str | None:
    """Read, edit and write the store under its lock; the damaged-file warning, if any."""
    try:
        with _locked():
            records, warning = load_records()
            edit(records)
            _save(records, damaged=warning is not None)
    except OSError as exc:
        raise TrustError(f"cannot write {trust_file()}: {exc.strerror or exc}") from None
    return warning


def trust(root: Path, expect: Fingerprint | None = None) -> tuple[Record, str | None]:
    """Trust `root` as it is now (or refuse if it is no longer `expect`)."""
    real = root.resolve()
    now = fingerprint(real)
    if expect is not None and now != expect:
        raise TrustError(f"{display_text(str(real))} changed while you were deciding; "
                         "look again before trusting it")
    record = Record(str(real), now.digest, dict(now.parts), time.time())
    warning = _change(lambda records: records.__setitem__(record.path, record))
    return record, warning


def revoke(root: Path) -> tuple[bool, str | None]:
    real = str(root.resolve())
    found: list[bool] = []
    warning = _change(lambda records: found.append(records.pop(real, None) is not None))
    return bool(found and found[0]), warning


# -- the check -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrustStatus:
    root: Path
    trusted: bool
    reason: str  # one line: why not, and the command that trusts it ("" when trusted)
    warning: str | None = None  # the trust file is damaged
    fingerprint: Fingerprint | None = None


def check(root: Path) -> TrustStatus:
    """Is `root` trusted, with the configuration it has now?"""
    real = root.resolve()
    records, warning = load_records()
    record = records.get(str(real))
    how = trust_command(real)
    if record is None:
        why = "untrusted" + (" (the trust file is damaged)" if warning else "")
        return TrustStatus(real, False, f"{why}: run {how}", warning)
    try:
        now = fingerprint(real)
    except TrustError as exc:
        return TrustStatus(real, False, f"untrusted: {exc}", warning)
    if now.digest == record.digest:
        return TrustStatus(real, True, "", warning, now)
    changed = [name for name in PARTS if record.parts.get(name) != now.parts[name]] \
        or list(PARTS)
    return TrustStatus(real, False, f"{' and '.join(changed)} changed since you trusted "
                                    f"it: run {how}", warning, now)


# -- what trusting lets run ----------------------------------------------------------


def _commands(section: object, prefix: str) -> Iterator[str]:
    """Every `*_command` / `command` string in a bernstein.yaml map, one level down too."""
    if not isinstance(section, dict):
        return
    for key, value in section.items():
        where = f"{prefix}.{key}"
        if isinstance(value, str) and (key == "command" or str(key).endswith("_command")):
            yield f"{where}: {value}"
        elif isinstance(value, dict):
            yield from _commands(value, where)
        elif key == "pipeline" and isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict) and isinstance(entry.get("command_override"), str):
                    yield f"{where}[{entry.get('name')}]: {entry['command_override']}"


def _gate_names(raw: object) -> list[str]:
    from console.sdd.gate_config import SUPPORTED, GateConfigError, parse_quality_gates

    pipeline = raw.get("pipeline") if isinstance(raw, dict) else None
    named = {str(e.get("name")) for e in pipeline if isinstance(e, dict)} \
        if isinstance(pipeline, list) else set()
    try:
        config = parse_quality_gates(raw, frozenset(named - SUPPORTED))  # plugins' names
    except GateConfigError as exc:
        return [f"quality_gates cannot be used ({exc}); the engine will refuse it"]
    if not config.enabled or not config.pipeline:
        return []
    return ["quality gates on the project's code: "
            + ", ".join(spec.name for spec in config.pipeline)]


def what_runs(root: Path) -> list[str]:
    """What the engine will run once `root` is trusted, one line each, printable."""
    import shlex

    from console.sdd.project_config import ConfigError, load_config

    lines: list[str] = []
    try:
        config = load_config(root)
    except ConfigError as exc:
        lines.append(f"bernstein.yaml cannot be used ({exc}); the engine will refuse it")
        config = None
    if config is not None:
        for name, argv in sorted(config.agents.commands.items()):
            lines.append(f"agent command (agents.{name}): {shlex.join(argv)}")
        if not config.agents.commands:
            lines.append(f"agents: the '{config.agents.default}' adapter (a coding-agent CLI)")
        gates = config.raw.get("quality_gates")
        lines += _gate_names(gates)
        lines += [f"gate command {c}" for c in _commands(gates, "quality_gates")]
        evolution = config.raw.get("evolution")
        lines += [f"evolution command {c}" for c in _commands(evolution, "evolution")]
        evals = evolution.get("evals") if isinstance(evolution, dict) else None
        if isinstance(evals, dict):
            lines += [f"evolution eval {name}: {cmd}" for name, cmd in evals.items()]
        signals = config.server_signals
        lines += [f"a task server's test_passes may run (cluster.server_signals): {cmd}"
                  for cmd in sorted(signals.commands.values())]
        lines += ["a task server's api_responds may fetch from (cluster.server_signals): "
                  + (f"[{host}]" if ":" in host else host)
                  + ("" if port is None else f":{port}")
                  for host, port in sorted(signals.url_hosts, key=str)]
    plugins = root / ".bernstein" / "gates"
    if plugins.is_dir() and not plugins.is_symlink():
        lines += [f"gate plugin (imported into this process): .bernstein/gates/{p.name}"
                  for p in sorted(plugins.glob("*.py"))]
    lines += role_lines(root)
    lines += repo_config.runnable(root)
    lines.append("tickets' test_passes commands and api_responds checks")
    return [display_text(line) for line in lines]
