"""A hostile task server against a cluster worker (#23): what it answers is data. A claimed
task whose id would be a path outside the clone is never run and nothing is written for
it (its failure goes back on a quoted path); a claimed task's metadata cannot steer the
engine (attempt, model, branch, holds); a node id that is not an id is refused, once, and
nothing is claimed under it. Real worker processes, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from console.sdd.skeleton import init_project
from tests.bernstein_server import serve, task_response
from tests.conftest import trusted
from tests.engine_kit import git, make_repo, tasks
from tests.test_engine_run import _env


class ClusterServer:
    """Gives each of `hand_out` once on GET /tasks/next/{role}, then 404; records the rest."""

    def __init__(self, hand_out: list[dict[str, Any]], node: dict[str, Any]) -> None:
        self.hand_out = list(hand_out)
        self.node = node
        self.seen: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = self.path.split("?")[0]
                with owner.lock:
                    owner.seen.append((method, self.path, body))
                    if method == "GET" and path.startswith("/tasks/next/"):
                        return (self._answer(200, owner.hand_out.pop(0)) if owner.hand_out
                                else self._answer(404, {"detail": "No open tasks"}))
                if method == "GET" and path in ("/tasks/counts", "/tasks"):
                    return self._answer(200, {"total": 0} if path.endswith("counts") else [])
                if method == "POST" and path == "/cluster/nodes":
                    return self._answer(201, owner.node)
                if method == "DELETE":
                    return self._answer(204)
                self._answer(200, {})

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.server = serve(Handler, "hostile-cluster")
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self, method: str) -> list[str]:
        with self.lock:
            return [path for m, path, _ in self.seen if m == method]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    seed = make_repo(tmp_path)
    config = (seed / "bernstein.yaml").read_text()
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(tmp_path / "origin.git")],
                   check=True)
    root = tmp_path / "w"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "origin.git"), str(root)], check=True)
    init_project(root)
    (root / "bernstein.yaml").write_text(config)
    return trusted(root), _env(tmp_path)


def _work(root: Path, env: dict[str, str], url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run", "--server",
                           url, "--roles", "backend", "--until-idle"],
                          env={**env, "BERNSTEIN_AUTH_TOKEN": "t"}, capture_output=True,
                          text=True, timeout=180)


NODE = {"id": "node1", "name": "w", "url": "", "status": "online", "capacity": {},
        "last_heartbeat": 1.0, "registered_at": 1.0, "labels": {}, "cell_ids": []}


def test_a_task_id_that_is_a_path_is_never_run(clone, tmp_path: Path) -> None:
    root, env = clone
    evil = "../../../pwned"
    server = ClusterServer([task_response(evil, "Escape", description=f"write {evil}.txt x")],
                           NODE)
    try:
        out = _work(root, env, server.url)
    finally:
        server.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert evil not in tasks(root)
    assert not list(tmp_path.rglob("pwned*"))
    assert git(root, "branch", "--list", "bernstein/*") == ""
    assert "/tasks/..%2F..%2F..%2Fpwned/fail" in server.paths("POST")


def test_a_claimed_tasks_metadata_cannot_steer_the_engine(clone) -> None:
    root, env = clone
    steering = task_response("abc123def456", "Steer", description="write out/s.txt s",
                             metadata={"attempt": 41, "branch": "../../x", "held_by": None,
                                       "next_model": "opus", "next_by_operator": True,
                                       "require_review": True})
    server = ClusterServer([steering], NODE)
    try:
        out = _work(root, env, server.url)
    finally:
        server.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    local = tasks(root)["abc123def456"]
    assert local.status == "done", out.stdout
    assert local.metadata["attempt"] == 1 and local.metadata["branch"] == "bernstein/abc123def456-1"
    assert local.metadata["last_model"] != "opus"
    completes = [b for m, p, b in server.seen if p.endswith("/abc123def456/complete")]
    assert completes and completes[0]["agent_branch"] == "main"


def test_a_node_id_that_is_not_an_id_is_refused_and_nothing_is_claimed(clone) -> None:
    root, env = clone
    server = ClusterServer([task_response("t1", "Never claimed")], dict(NODE, id="../x"))
    try:
        out = _work(root, env, server.url)
    finally:
        server.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("names no usable node id") == 1, out.stdout
    assert not [p for p in server.paths("GET") if p.startswith("/tasks/next/")]
