"""A task server's completion signals are data on a cluster worker (#32): a claimed task's
`test_passes` command never runs and its `api_responds` URL is never fetched unless the
worker's trusted bernstein.yaml lists that command and host (`cluster.server_signals`);
a dropped signal is one line in the worker's output and one report to the server; no
request made on a signal's behalf follows a redirect. Real worker processes, a real task
server and real recording servers on 127.0.0.1."""

from __future__ import annotations

import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from console.engine.store import TaskStore
from console.model import CompletionSignal, Task, TaskState
from console.sdd.paths import SddPaths
from console.sdd.skeleton import init_project
from tests.bernstein_server import serve, task_response
from tests.conftest import trusted
from tests.engine_kit import make_repo, tasks
from tests.security.test_cluster_hostile import NODE, ClusterServer, _work
from tests.test_engine_run import _env

DROPPED = "server-supplied signal(s) not run on this worker"


class Recorder:
    """Records every request's path; `redirect_to`: answers 302 there instead of 200."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.hits: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with owner.lock:
                    owner.hits.append(self.path)
                if redirect_to is not None:
                    self.send_response(302)
                    self.send_header("Location", redirect_to)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = serve(Handler, "recorder")
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def setup(tmp_path: Path):
    """(make a trusted clone with this extra bernstein.yaml text, the task, the marker,
    the recorder, the redirector)"""
    seed = make_repo(tmp_path)
    config = (seed / "bernstein.yaml").read_text()
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(tmp_path / "origin.git")],
                   check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "marker"
    recorder = Recorder()
    redirector = Recorder(redirect_to=f"{recorder.url}/followed")
    command = f"touch {shlex.quote(str(marker))}"
    task = task_response("abc123def456", "Signals", description="write out/s.txt s",
                         completion_signals=[
                             {"type": "test_passes", "command": command},
                             {"type": "api_responds", "url": f"{recorder.url}/hit"},
                             # a redirect is an answer: 302 passes only if not followed
                             {"type": "api_responds", "url": f"{redirector.url}/go",
                              "status": 302}])

    def clone(extra: str = "") -> tuple[Path, dict[str, str]]:
        root = tmp_path / "w"
        subprocess.run(["git", "clone", "-q", str(tmp_path / "origin.git"), str(root)],
                       check=True)
        init_project(root)
        (root / "bernstein.yaml").write_text(config + extra)
        return trusted(root), _env(tmp_path)

    yield clone, task, command, marker, recorder, redirector
    recorder.stop()
    redirector.stop()


def _run(root: Path, env: dict[str, str], task: dict[str, Any]
         ) -> tuple[subprocess.CompletedProcess[str], ClusterServer]:
    server = ClusterServer([task], NODE)
    try:
        out = _work(root, env, server.url)
    finally:
        server.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    return out, server


def _progress(server: ClusterServer) -> list[str]:
    return [str(body.get("message")) for method, path, body in server.seen
            if method == "POST" and path.endswith("/progress") and isinstance(body, dict)]


def test_server_signals_run_nothing_without_the_local_allow_list(setup) -> None:
    clone, task, _command, marker, recorder, redirector = setup
    root, env = clone()
    out, server = _run(root, env, task)
    assert not marker.exists()  # the server's command never ran
    assert recorder.hits == [] and redirector.hits == []  # no URL of the server's fetched
    said = [line for line in out.stdout.splitlines() if DROPPED in line]
    assert len(said) == 1, out.stdout
    assert "3 " + DROPPED in said[0] and "test_passes" in said[0], said
    assert "signals are not run here (cluster.server_signals allows none)" in out.stdout
    reported = [m for m in _progress(server) if DROPPED in m]
    assert len(reported) == 1 and "api_responds" in reported[0], _progress(server)
    local = tasks(root)["abc123def456"]
    assert local.completion_signals == ()  # none of them in the worker's own task log
    assert DROPPED in local.metadata["cluster"]["dropped_signals"]


def test_the_trusted_allow_list_lets_exactly_those_run_and_no_redirect_is_followed(
        setup) -> None:
    clone, task, command, marker, recorder, redirector = setup
    root, env = clone("cluster:\n  server_signals:\n"
                      f"    commands: [{command!r}]\n"
                      f"    url_hosts: ['127.0.0.1:{recorder.port}', "
                      f"'127.0.0.1:{redirector.port}']\n")
    near_miss = marker.with_name("near-miss")
    task["completion_signals"].append(  # an allowed command with more after it
        {"type": "test_passes", "command": f"{command}; touch {shlex.quote(str(near_miss))}"})
    out, server = _run(root, env, task)
    assert marker.exists(), out.stdout  # the listed command ran
    assert not near_miss.exists()
    assert recorder.hits == ["/hit"]  # fetched once; the redirect to /followed was not
    assert redirector.hits == ["/go"]
    assert tasks(root)["abc123def456"].status == "done", out.stdout
    said = [line for line in out.stdout.splitlines() if DROPPED in line]
    assert len(said) == 1 and "1 " + DROPPED in said[0] and "near-miss" in said[0], said
    assert len([m for m in _progress(server) if DROPPED in m]) == 1
    allowed = [line for line in out.stdout.splitlines()
               if "may run 1 command(s) of cluster.server_signals and fetch from" in line]
    assert len(allowed) == 1 and f"127.0.0.1:{recorder.port}" in allowed[0] \
        and f"127.0.0.1:{redirector.port}" in allowed[0], out.stdout


def test_a_task_claimed_again_never_keeps_an_earlier_records_signals(setup) -> None:
    clone, task, command, marker, recorder, _redirector = setup
    root, env = clone()
    store = TaskStore(SddPaths(root), fsync=False)  # as an older worker left it: failed,
    store.load()  # with the server's signals of an earlier claim
    store.create(Task("abc123def456", "Signals", "open", completion_signals=(
        CompletionSignal("test_passes", command),
        CompletionSignal("api_responds", f"{recorder.url}/hit", 200))))
    store.transition("abc123def456", TaskState.FAILED, reason="released")
    task["completion_signals"] = []
    _run(root, env, task)
    assert not marker.exists() and recorder.hits == []
    assert tasks(root)["abc123def456"].completion_signals == ()
