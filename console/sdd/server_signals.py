"""`cluster.server_signals` in bernstein.yaml: the completion signals a task server may
hand a cluster worker that run something on the worker's machine.

A task server's answers are data (DESIGN §7): a claimed task's `test_passes` command or
`api_responds` URL runs or is fetched only when the worker's own, trusted bernstein.yaml
lists it:

    cluster:
      server_signals:
        commands: ["pytest -q", "make test"]
        url_hosts: ["127.0.0.1:8000", "staging.example.com"]

Matching, exactly (no patterns, no wildcards, no prefixes):

- A command matches an entry when both split into the same words the way a POSIX shell
  would quote them (`shlex.split`, then `shlex.join`): `pytest  -q` matches `pytest -q`,
  `pytest -q; rm -rf ~` does not. Two strings with the same words can still mean
  different things to `/bin/sh` (`a;b` and `'a;b'`), so what runs is the operator's entry
  as written here, never the server's text: a server can only pick one of these commands.
- A URL matches when its scheme is http or https, it carries no user name or password,
  and its host (IDNA-encoded, lower case, without a trailing dot, as the HTTP client
  connects to it) equals an entry's host; an entry that names a port (`host:8000`,
  `[::1]:8000`) matches that port only (80/443 when the URL names none). Hosts are
  compared as written: `127.1` is not `127.0.0.1`, and a name is not its address.

Bad entries are one-line problems and allow nothing; so is an unknown key. The policy is
only honoured when the project is trusted (the worker checks): an untrusted project
allows nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

KEYS = ("commands", "url_hosts")
MAX_ENTRIES = 200
MAX_ENTRY_CHARS = 4096
DEFAULT_PORTS = {"http": 80, "https": 443}
_NOT_IN_HOST = frozenset("/?#@\\*%\"' \t\r\n")


def normalise_command(text: str) -> str | None:
    """The command's words, quoted back as a POSIX shell reads them; None when it does
    not split (an unclosed quote) or is empty."""
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    return shlex.join(words) if words else None


def host_key(raw_host: bytes | str) -> str:
    """A host as compared here: ASCII (IDNA), lower case, no trailing dot."""
    host = raw_host.decode("ascii", "replace") if isinstance(raw_host, bytes) else raw_host
    return host.lower().rstrip(".")


def parse_host(entry: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address → (host, port);
    ValueError naming what is wrong."""
    import httpx

    text = entry.strip()
    if not text or any(c in _NOT_IN_HOST for c in text) or "://" in text:
        raise ValueError("expected a host or host:port (no scheme, path, wildcard or "
                         "user name)")
    if text.count(":") > 1 and not text.startswith("["):
        text = f"[{text}]"  # a bare IPv6 address
    try:
        url = httpx.URL(f"http://{text}/")
    except (httpx.InvalidURL, ValueError) as exc:
        raise ValueError(f"not a host: {exc}") from None
    if not url.raw_host:
        raise ValueError("not a host")
    if url.port is not None and not 0 < url.port < 65536:
        raise ValueError(f"port {url.port} is out of range")
    return host_key(url.raw_host), url.port


@dataclass(frozen=True, slots=True)
class ServerSignalPolicy:
    """What server-supplied signals may run here; the default allows nothing."""

    commands: Mapping[str, str] = field(default_factory=dict)  # normalised → as written
    url_hosts: frozenset[tuple[str, int | None]] = frozenset()

    @property
    def allows_any(self) -> bool:
        return bool(self.commands or self.url_hosts)

    def command(self, text: str) -> str | None:
        """The operator's entry `text` matches (what is to run instead of `text`), or
        None: no entry has the same words."""
        normal = normalise_command(text)
        return self.commands.get(normal) if normal is not None else None

    def allows_host(self, host: str, port: int) -> bool:
        """`host` (as `host_key` gives it) on `port` is listed, with that port or none."""
        return (host, port) in self.url_hosts or (host, None) in self.url_hosts


def _entries(raw: Mapping[str, object], key: str, where: str,
             problems: list[str]) -> list[tuple[int, str]]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"'{where}.{key}' must be a list of strings (ignored)")
        return []
    if len(value) > MAX_ENTRIES:
        problems.append(f"'{where}.{key}' has more than {MAX_ENTRIES} entries; the rest "
                        "are ignored")
    out = []
    for index, item in enumerate(value[:MAX_ENTRIES]):
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_ENTRY_CHARS:
            problems.append(f"'{where}.{key}[{index}]' must be a non-empty string of at "
                            f"most {MAX_ENTRY_CHARS} characters (ignored)")
            continue
        out.append((index, item))
    return out


def parse_server_signals(raw: object, where: str = "cluster.server_signals"
                         ) -> tuple[ServerSignalPolicy, list[str]]:
    """The policy from `cluster.server_signals` (None: nothing allowed) and one line per
    bad or unknown value (each names its key; a bad entry allows nothing)."""
    if raw is None:
        return ServerSignalPolicy(), []
    if not isinstance(raw, dict):
        return ServerSignalPolicy(), [f"'{where}' must be a map with {' and '.join(KEYS)} "
                                      "(ignored: no server-supplied signal runs)"]
    problems = [f"unknown key '{where}.{key}' (ignored)" for key in raw if key not in KEYS]
    commands: dict[str, str] = {}
    for index, text in _entries(raw, "commands", where, problems):
        normal = normalise_command(text)
        if normal is None:
            problems.append(f"'{where}.commands[{index}]' is not a command a shell can "
                            "split (an unclosed quote?) (ignored)")
            continue
        commands.setdefault(normal, text)
    hosts: set[tuple[str, int | None]] = set()
    for index, text in _entries(raw, "url_hosts", where, problems):
        try:
            hosts.add(parse_host(text))
        except ValueError as exc:
            problems.append(f"'{where}.url_hosts[{index}]' {text[:80]!r}: {exc} (ignored)")
    return ServerSignalPolicy(commands, frozenset(hosts)), problems
