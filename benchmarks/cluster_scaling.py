"""Cluster workers (#23): tasks per minute with 1, 2 and 4 `run --server` workers on one
real Bernstein 3.23.0 task server, and the scaling ratio against one worker.

One `bernstein serve` (cluster endpoints on, a token) on a free loopback port; one bare
git origin; each worker a separate process on its own clone (as on separate hosts),
one agent slot each, landing through the origin. Each configuration gets its own tasks
(a role of its own, so only its workers claim them): the spec agent sleeps AGENT_S (an
agent waiting on its model) and writes one file; the janitor and the default gates
(lint, pii_scan, dlp_scan) run as for any task. The time is from starting the workers
to the last task `done` on the server, so it includes each worker's start-up, claims,
gates, pushes and push races. On this machine the workers share 2 cores with
everything else, so the ratio says how much of the agents' waiting the cluster
overlaps, not what more hosts would give.

Needs a Bernstein install at $BERNSTEIN_VENV (or /work/bvenv); skipped with a note
without one.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, Figure, came_up, stop_group
from console.remote.client import ServerClient, ServerError

AGENT = REPO / "tests" / "agents" / "spec_agent.py"
AGENT_S = 2.0
NAME = "cluster: tasks/min with {n} worker(s)"


def _bernstein() -> Path | None:
    for venv in (os.environ.get("BERNSTEIN_VENV", ""), "/work/bvenv"):
        binary = Path(venv) / "bin" / "bernstein"
        if venv and binary.is_file():
            return binary
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


class Cluster:
    """A served central project, a bare origin, and clones made on demand."""

    def __init__(self, binary: Path, work: Path) -> None:
        self.work = work
        home = work / "home"
        home.mkdir()
        self.token = secrets.token_hex(16)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("BERNSTEIN_")}
        self.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                        XDG_STATE_HOME=str(home / ".state"), XDG_CACHE_HOME=str(home / ".cache"),
                        BERNSTEIN_AUTH_TOKEN=self.token, GIT_AUTHOR_NAME="bench",
                        GIT_AUTHOR_EMAIL="bench@example.invalid", GIT_COMMITTER_NAME="bench",
                        GIT_COMMITTER_EMAIL="bench@example.invalid")
        seed = work / "seed"
        seed.mkdir()
        _git("init", "-q", "-b", "main", cwd=seed)
        (seed / "README.md").write_text("# bench\n")
        _git("add", "-A", cwd=seed)
        _git("commit", "-qm", "init", cwd=seed)
        self.origin = work / "origin.git"
        _git("clone", "-q", "--bare", str(seed), str(self.origin))
        central = work / "central"
        central.mkdir()
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(work / "serve.log", "wb")  # noqa: SIM115 - closed in stop()
        self.server = subprocess.Popen(
            [str(binary), "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=central,
            env=dict(self.env, BERNSTEIN_CLUSTER_ENABLED="1"), stdout=self.log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.client = ServerClient(self.url, token=self.token)
        if not came_up(self.client, self.server):
            self.stop()
            raise RuntimeError("bernstein serve did not come up")

    def clone(self, name: str) -> Path:
        root = self.work / name
        _git("clone", "-q", str(self.origin), str(root))
        (root / "bernstein.yaml").write_text(
            "agents:\n  script:\n"
            f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(AGENT))}]\n")
        for command in ("init", "trust"):
            subprocess.run([sys.executable, "-m", "console", "-C", str(root), command],
                           env=self.env, check=True, capture_output=True, cwd=REPO)
        return root

    def stop(self) -> None:
        self.client.close()
        stop_group(self.server)
        self.log.close()


def _one(cluster: Cluster, workers: int, tasks: int, label: str) -> float:
    """Tasks per minute for `workers` worker processes on `tasks` fresh tasks."""
    role = f"bench{label}"
    for i in range(tasks):
        cluster.client.request("POST", "/tasks", ok=(201,), body={
            "title": f"{role} {i}", "role": role,
            "description": f"sleep {AGENT_S}\nwrite out/{role}-{i:03}.txt {i}",
            "completion_signals": [{"type": "path_exists", "value": f"out/{role}-{i:03}.txt"}]})
    roots = [cluster.clone(f"{role}-w{n}") for n in range(workers)]
    started = time.monotonic()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "console", "-C", str(root), "run", "--server", cluster.url,
         "--workers", "1", "--roles", role, "--until-idle", "--name", root.name],
        env=cluster.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for root in roots]
    try:
        while True:
            records, _ = cluster.client.tasks_page(limit=500, offset=0, status="done")
            if sum(1 for r in records if r.get("role") == role) >= tasks:
                elapsed = time.monotonic() - started
                break
            if all(p.poll() is not None for p in procs):
                raise RuntimeError(f"the {role} workers exited before every task was done")
            time.sleep(0.2)
    finally:
        for proc in procs:
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
    return tasks / elapsed * 60


def run(quick: bool) -> list[Figure]:
    binary = _bernstein()
    names = [NAME.format(n=n) for n in (1, 2, 4)]
    if binary is None:
        return [Figure(name, "/min", [float("nan")],
                       notes={"skipped": "no Bernstein install (set BERNSTEIN_VENV)"})
                for name in names]
    tasks, repeats = (8, 1) if quick else (16, 2)
    rates: dict[int, list[float]] = {1: [], 2: [], 4: []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        try:
            cluster = Cluster(binary, Path(tmp))
        except (OSError, RuntimeError, ServerError, subprocess.SubprocessError) as exc:
            return [Figure(name, "/min", [float("nan")], notes={"skipped": str(exc)[:200]})
                    for name in names]
        try:
            for repeat in range(repeats):
                for workers in rates:
                    rates[workers].append(_one(cluster, workers, tasks,
                                               f"{workers}x{repeat}"))
        finally:
            cluster.stop()
    figures = [Figure(NAME.format(n=n), "/min", samples,
                      notes={"tasks": tasks, "agent_s": AGENT_S, "slots_per_worker": 1})
               for n, samples in rates.items()]
    for figure, workers in zip(figures, rates, strict=True):
        figure.notes["ratio_vs_1"] = round(figure.median / figures[0].median, 2)
        figure.notes["ideal"] = workers
    return figures
