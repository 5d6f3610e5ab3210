"""A project a live Bernstein task server runs is found without runtime/server.pid
(#17.1): by the project's port answering Bernstein's /health on 127.0.0.1, or by a
`bernstein serve` process whose cwd is the project. Then every local write is refused
(exit 2, naming the `--server` command) and no engine starts. With stand-in servers and
processes (tests/test_ownership_real.py does it with the real Bernstein 3.23.0)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from console.engine.lock import bernstein_owner
from console.engine.served import DEFAULT_PORT, probe_health, project_ports, valid_port
from console.sdd.paths import SddPaths
from tests.bernstein_server import FakeBernstein, serve
from tests.conftest import run_cli
from tests.engine_kit import make_repo, tasks, ticket
from tests.test_remote import free_port


@pytest.fixture
def fake() -> Iterator[FakeBernstein]:
    server = FakeBernstein("tok").start()
    yield server
    server.stop()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _configure(root: Path, port: object) -> None:
    (root / ".sdd" / "config.yaml").write_text(f"server_port: {port}\nmax_workers: 6\n")


def test_the_project_port_answering_bernsteins_health_owns_it(tmp_path: Path,
                                                              fake: FakeBernstein) -> None:
    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Would run", description="write out/t1.txt")
    _configure(root, _port(fake.url))
    owner = bernstein_owner(SddPaths(root))
    assert owner is not None and owner.what == "bernstein server" and owner.url == fake.url
    assert "answers Bernstein's /health" in str(owner)
    for args, tail in ((("cancel", "T1"), "cancel T1"), (("retry", "T1"), "retry T1"),
                       (("pause",), "pause"), (("run", "--until-idle"), ""),
                       (("gates",), ""), (("evolve",), ""), (("approve", "P1"), "approve P1")):
        out = run_cli("-C", str(root), *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
        assert f"bernstein-tui --server {fake.url}" in out.stderr, out.stderr
        assert out.stderr.rstrip().endswith(tail), out.stderr
    assert "T1" not in tasks(root)  # no engine took the ticket in: nothing ran, nothing written
    assert not (root / ".sdd" / "runtime" / "engine.lock").exists()
    # read-only is no write: status still works
    assert run_cli("-C", str(root), "status").returncode == 0


def test_the_console_starts_no_engine_on_it_and_says_how_to_attach(
        tmp_path: Path, fake: FakeBernstein) -> None:
    from console.tui.app import ConsoleApp
    from console.tui.widgets.status_bar import StatusBar

    root = make_repo(tmp_path)
    ticket(root, "t1", id="T1", title="Would run", description="write out/t1.txt")
    _configure(root, _port(fake.url))

    async def scenario() -> tuple[str, object]:
        app = ConsoleApp(root, read_only=False, engine=True)
        async with app.run_test(size=(200, 40)) as pilot:
            deadline = time.monotonic() + 30
            while "--server" not in app.query_one(StatusBar).engine_line:
                assert time.monotonic() < deadline, app.query_one(StatusBar).engine_line
                await pilot.pause(0.1)
            await pilot.press("x")  # cancel the selected task: refused, not done
            await pilot.pause(1.0)
            return app.query_one(StatusBar).engine_line, app.engine

    line, engine = asyncio.run(scenario())
    assert engine is None and "watching only" in line
    assert f"bernstein-tui --server {fake.url}" in line
    assert "T1" not in tasks(root)  # the ticket was never taken in


class _NotBernstein(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok"}).encode()  # a 200, but not Bernstein's health
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_any_200_is_not_bernstein_and_a_silent_port_is_given_up(tmp_path: Path) -> None:
    server = serve(_NotBernstein, "not-bernstein")
    try:
        port = server.server_address[1]
        assert probe_health(port) is False
        root = make_repo(tmp_path)
        _configure(root, port)
        assert bernstein_owner(SddPaths(root)) is None
        out = run_cli("-C", str(root), "cancel", "nothing")
        assert "--server" not in out.stderr
    finally:
        server.shutdown()
        server.server_close()
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        assert probe_health(silent.getsockname()[1], timeout=0.3) is False
        assert time.monotonic() - started < 10  # bounded (generous: a shared machine)


def test_project_ports_are_data(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    paths = SddPaths(root)
    for bad in ("0", "70000", "-1", "abc", "'8052; rm -rf /'", "true", "1e3"):
        _configure(root, bad)
        assert project_ports(paths) == [DEFAULT_PORT], bad
    _configure(root, 9123)
    (paths.sdd / "runtime").mkdir(exist_ok=True)
    (paths.sdd / "runtime" / "server.port").write_text("9124\n")
    assert project_ports(paths) == [9124, 9123]
    (paths.sdd / "runtime" / "server.port").unlink()
    os.mkfifo(paths.sdd / "runtime" / "server.port")  # never blocks the check
    assert project_ports(paths) == [9123]
    assert [valid_port(v) for v in (True, 1, 65535, 65536, "80", None)] == [
        None, 1, 65535, None, 80, None]


def _fake_serve(where: Path, bin_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """A process whose command line is `…/bernstein serve --port PORT`, running in `where`."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "bernstein"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    process = subprocess.Popen([str(script), "serve", "--host", "127.0.0.1", "--port",
                                str(port)], cwd=where)
    deadline = time.monotonic() + 10
    while b"serve" not in Path(f"/proc/{process.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return process


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_bernstein_serve_process_in_the_project_owns_it(tmp_path: Path,
                                                          fake: FakeBernstein) -> None:
    root = make_repo(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    port = free_port()
    process = _fake_serve(root, tmp_path / "bin", port)
    try:
        owner = bernstein_owner(SddPaths(root))
        assert owner is not None and owner.pid == process.pid
        assert owner.url == f"http://127.0.0.1:{port}" and "`bernstein serve`" in str(owner)
        out = run_cli("-C", str(root), "retry", "T9")
        assert out.returncode == 2 and f"--server http://127.0.0.1:{port}" in out.stderr
    finally:
        process.kill()
        process.wait()
    assert bernstein_owner(SddPaths(root)) is None
    # a server running in another project, on the port this project names, is not ours
    _configure(root, _port(fake.url))
    elsewhere = _fake_serve(other, tmp_path / "bin", _port(fake.url))
    try:
        assert bernstein_owner(SddPaths(root)) is None
    finally:
        elsewhere.kill()
        elsewhere.wait()
    assert bernstein_owner(SddPaths(root)) is not None  # now the port is all we know
