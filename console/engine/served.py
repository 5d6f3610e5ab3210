"""A live `bernstein serve` on a project, found without `runtime/server.pid` (3.23.0's
`serve` writes none): a Bernstein process whose working directory is the project, or
the project's own port answering Bernstein's `/health` on 127.0.0.1.

Everything read from the project is data: a port is an int 1-65535 or ignored, the
probe goes to 127.0.0.1 only, is bounded in time and in bytes, and counts only an
answer shaped like Bernstein's health JSON (not any 200).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from console.sdd.paths import SddPaths

DEFAULT_PORT = 8052  # `bernstein serve --port` default, and what `bernstein init` writes
PROBE_S = 0.5  # connect + answer, per port
MAX_HEALTH_BYTES = 64 * 1024
MAX_PROCS = 20000  # /proc entries looked at, at most
_PORT_LINE = re.compile(rb"^\s*server_port\s*:\s*['\"]?(\d{1,5})['\"]?\s*(?:#.*)?$", re.M)


@dataclass(frozen=True, slots=True)
class Served:
    pid: int  # -1 when only the port answered
    port: int
    how: str  # what showed it

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def valid_port(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        port = int(str(value).strip()) if isinstance(value, (int, str, bytes)) else None
    except ValueError:
        return None
    return port if port is not None and 1 <= port <= 65535 else None


def _small(path: Path, limit: int = 16384) -> bytes:
    """The start of a regular file, never following a link out; b"" otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def project_ports(paths: SddPaths) -> list[int]:
    """The ports a Bernstein on this project would use: `runtime/server.port` (written by
    `bernstein run`), `config.yaml`'s `server_port` (`bernstein init`: 8052), the default."""
    found: list[int] = []
    port = valid_port(_small(paths.sdd / "runtime" / "server.port", 16).decode("ascii",
                                                                                "replace"))
    if port:
        found.append(port)
    match = _PORT_LINE.search(_small(paths.sdd / "config.yaml"))
    port = valid_port(match.group(1).decode()) if match else None
    if port and port not in found:
        found.append(port)
    if not found:
        found.append(DEFAULT_PORT)
    return found


def looks_like_bernstein_health(body: object) -> bool:
    """Bernstein's `/health`: {status: ok|degraded, uptime_s: number, task_count: int,
    components: {server: …} (3.23.0)}."""
    if not isinstance(body, dict):
        return False
    uptime, count = body.get("uptime_s"), body.get("task_count")
    components = body.get("components")
    return (body.get("status") in ("ok", "degraded")
            and isinstance(uptime, (int, float)) and not isinstance(uptime, bool)
            and ((isinstance(count, int) and not isinstance(count, bool))
                 or (isinstance(components, dict) and "server" in components)))


def probe_health(port: int, timeout: float = PROBE_S) -> bool:
    """Does 127.0.0.1:port answer Bernstein's health JSON within `timeout`?"""
    if valid_port(port) is None:
        return False
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/health", headers={"Accept": "application/json",
                                                 "Accept-Encoding": "identity"})
        response = conn.getresponse()
        if response.status != 200:
            return False
        raw = response.read(MAX_HEALTH_BYTES + 1)
        if len(raw) > MAX_HEALTH_BYTES:
            return False
        return looks_like_bernstein_health(json.loads(raw))
    except (OSError, http.client.HTTPException, ValueError, RecursionError):
        return False
    finally:
        conn.close()


def command_line(pid: int) -> list[str]:
    """The process's argv from /proc, or `ps` where there is no /proc (empty when it
    cannot be read)."""
    if not os.path.isdir("/proc/self"):
        try:
            out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                                 text=True, timeout=5, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return out.split()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(65536)
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def is_bernstein(argv: list[str]) -> bool:
    """Bernstein's own command line: its `bernstein` entry point (`bernstein serve`, run by
    a python or not), `python -m bernstein…`, or uvicorn serving `bernstein.…:app`.
    Not bernstein-tui, not a shell, not pid 1."""
    for index, arg in enumerate(argv[:8]):
        name = os.path.basename(arg)
        if name in ("bernstein", "bernstein.exe"):
            return True
        module = argv[index + 1] if arg == "-m" and index + 1 < len(argv) else arg
        if module.split(":")[0].split(".")[0] == "bernstein" and (arg == "-m" or ":" in module):
            return True
    return False


def _serve_port(argv: list[str]) -> int:
    """`--port N` / `--port=N` of a `bernstein serve` command line; the default otherwise."""
    for index, arg in enumerate(argv):
        if arg == "--port" and index + 1 < len(argv):
            return valid_port(argv[index + 1]) or DEFAULT_PORT
        if arg.startswith("--port="):
            return valid_port(arg.partition("=")[2]) or DEFAULT_PORT
    return DEFAULT_PORT


def _inside(cwd: str, root: Path) -> bool:
    try:
        return Path(cwd) == root or root in Path(cwd).parents
    except (OSError, ValueError):
        return False


def serving_process(root: Path, elsewhere: set[int] | None = None) -> Served | None:
    """A `bernstein serve` (or `bernstein run`'s server) whose cwd is in the project; the
    ports of those running elsewhere are added to `elsewhere`."""
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()][:MAX_PROCS]
    except OSError:
        return None
    me = os.getpid()
    root = root.resolve()
    elsewhere = set() if elsewhere is None else elsewhere
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone, or another user's
        argv = command_line(pid)
        if not is_bernstein(argv) or not _is_server(argv):
            continue
        if not _inside(cwd, root):
            elsewhere.add(_serve_port(argv))
            continue
        how = "`bernstein serve`" if "serve" in argv[:6] else "Bernstein's server"
        return Served(pid, _serve_port(argv), f"{how} in the project")
    return None


def _is_server(argv: list[str]) -> bool:
    """`bernstein serve …`, or uvicorn serving `bernstein.core.server:app` (`bernstein run`)."""
    return "serve" in argv[:6] or any("bernstein.core.server" in arg for arg in argv[:8])


def served(paths: SddPaths) -> Served | None:
    """A live Bernstein task server on this project, or None."""
    elsewhere: set[int] = set()
    found = serving_process(paths.root, elsewhere)
    if found is not None:
        return found
    if not paths.sdd.is_dir():
        return None
    for port in project_ports(paths):  # a port that another project's server holds is not ours
        if port not in elsewhere and probe_health(port):
            return Served(-1, port, f"127.0.0.1:{port} answers Bernstein's /health")
    return None
