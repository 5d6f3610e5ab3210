"""Bernstein's own console, `bernstein live --no-splash`, time to first task rows,
beside ours attached to the same server (`bernstein-tui --server URL`).

`bernstein live` reads its tasks from a running `bernstein serve` over HTTP (not
from `.sdd/` files), so "the same data" is a real Bernstein task server loaded with
tasks through its REST API, in a scratch git project with its own HOME.
(100 tasks: the most a default Bernstein tenant accepts.)
Both consoles run on the same kind of pty (pexpect, 120×40); "first task rows" is
the moment a task title is first on the terminal for `bernstein live` (it has no
trace) and our console's rows mark for ours, each from process start.

Needs a Bernstein install (Python ≥ 3.12, `pip install bernstein==3.23.0`), looked
for at $BERNSTEIN_BIN or /tmp/bern-venv/bin/bernstein, and port 8052 free (the port
`bernstein live` talks to). Without either the figure is skipped with a note.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, Figure, came_up, stop_group
from benchmarks.terminal import Screen, wait_trace
from console.remote.client import ServerClient, ServerError

CANDIDATES = (os.environ.get("BERNSTEIN_BIN", ""), "/tmp/bern-venv/bin/bernstein")
PORT = 8052  # `bernstein live` has no option for another server
NAME = "bernstein live --no-splash: first task rows"
TITLE = "Bench task"


def find() -> Path | None:
    for candidate in CANDIDATES:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Server:
    """`bernstein init` + `bernstein serve` in a scratch project with its own HOME."""

    def __init__(self, binary: Path, work: Path) -> None:
        self.binary = binary
        self.project = work / "proj"
        self.token = secrets.token_hex(24)
        self.url = f"http://127.0.0.1:{PORT}"
        home = work / "home"
        home.mkdir()
        self.project.mkdir()
        self.env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                        XDG_STATE_HOME=str(home / ".state"), XDG_CACHE_HOME=str(home / ".cache"),
                        XDG_DATA_HOME=str(home / ".data"), BERNSTEIN_AUTH_TOKEN=self.token,
                        GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
                        GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
        self.env.pop("BERNSTEIN_TUI_TRACE", None)
        git = ["git", "-C", str(self.project)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True, env=self.env)
        (self.project / "README.md").write_text("# bench\n")
        subprocess.run([*git, "add", "README.md"], check=True, env=self.env)
        subprocess.run([*git, "commit", "-qm", "initial"], check=True, env=self.env)
        subprocess.run([str(binary), "init"], cwd=self.project, env=self.env, check=True,
                       capture_output=True, timeout=300)
        self.log = open(work / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [str(binary), "serve", "--host", "127.0.0.1", "--port", str(PORT)],
            cwd=self.project, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.client = ServerClient(self.url, token=self.token)  # the console's own client
        if not came_up(self.client, self.process):
            self.stop()
            raise RuntimeError(f"bernstein serve did not come up (log: {self.log.name})")

    def load(self, count: int) -> None:
        for index in range(count):  # a refusal (e.g. 429 past the quota) is a ServerError
            self.client.request("POST", "/tasks", body={
                "title": f"{TITLE} {index:05d}", "description": "benchmark task",
                "role": ("backend", "qa", "docs")[index % 3]}, ok=(201,))

    def stop(self) -> None:
        if hasattr(self, "client"):
            self.client.close()
        stop_group(self.process)
        self.log.close()


def _theirs(server: Server) -> float:
    screen = Screen([str(server.binary), "live", "--no-splash"], cwd=server.project,
                    env=server.env, needles=(TITLE,))
    try:
        return (screen.wait_text(TITLE, 120) - screen.started) * 1000
    finally:
        screen.close()


def _ours(server: Server, work: Path) -> float:
    trace = work / f"trace-live-{time.monotonic_ns()}.jsonl"
    argv = [sys.executable, "-m", "console", "--server", server.url, "--read-only"]
    env = dict(server.env, BERNSTEIN_TUI_TRACE=str(trace))
    screen = Screen(argv, cwd=REPO, env=env)
    try:
        mark = wait_trace(trace, lambda m: m["event"] == "rows" and m["rows"] > 0, 120)
        return (mark["t"] - screen.started) * 1000
    finally:
        screen.close()


def run(quick: bool) -> list[Figure]:
    binary = find()
    if binary is None:
        return [Figure(NAME, "ms", [float("nan")],
                       notes={"skipped": "no Bernstein install (set BERNSTEIN_BIN)"})]
    if not _port_free(PORT):
        return [Figure(NAME, "ms", [float("nan")],
                       notes={"skipped": f"port {PORT} is in use (bernstein live needs it)"})]
    # 100: a default Bernstein tenant's quota (tenant_isolation max_tasks); a 101st
    # POST /tasks is answered 429
    tasks, repeats = (50, 2) if quick else (100, 5)
    with tempfile.TemporaryDirectory(prefix="bench-bernstein-") as tmp:
        try:
            server = Server(binary, Path(tmp))
        except (OSError, RuntimeError, ServerError, subprocess.SubprocessError) as exc:
            return [Figure(NAME, "ms", [float("nan")],
                           notes={"skipped": f"{binary} could not serve: {exc}"})]
        try:
            server.load(tasks)
            theirs = [_theirs(server) for _ in range(repeats)]
            ours = [_ours(server, Path(tmp)) for _ in range(repeats)]
        finally:
            server.stop()
    notes = {"tasks": tasks, "server": "bernstein serve (same one for both)"}
    theirs_fig = Figure(NAME, "ms", theirs, notes=dict(notes))
    ours_fig = Figure("bernstein-tui --server: first task rows", "ms", ours, notes=dict(notes))
    ours_fig.notes["ratio_vs_bernstein_live"] = round(ours_fig.median / theirs_fig.median, 3)
    return [theirs_fig, ours_fig]
