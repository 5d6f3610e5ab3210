"""A project the real Bernstein 3.23.0 serves (`bernstein serve`, which writes no
runtime/server.pid) is never run behind its back (#17.1), and `--server` works on it as
the console's header says (#17.3). Needs $BERNSTEIN_VENV (skipped loudly without it).

One project: our engine fails F1 and strands B1 (`blocked_by_failed_dep`); then the real
server serves it and two open tasks are made through its API.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.lock import bernstein_owner
from console.remote.client import ServerClient
from console.remote.source import RemoteSource
from console.sdd.paths import SddPaths
from tests.engine_kit import assert_idle_exit, git, make_repo, tasks, ticket
from tests.test_bernstein_roundtrip import TOKEN, Project, api, needs_bernstein, served
from tests.test_engine_run import _env, run_cli

pytestmark = needs_bernstein


class Served:
    def __init__(self, project: Project, url: str, opened: list[str]) -> None:
        self.project = project
        self.url = url
        self.opened = opened  # tasks made open through the API

    @property
    def root(self) -> Path:
        return self.project.root

    def statuses(self) -> dict[str, str]:
        status, body = api(self.url, "GET", "/tasks")
        assert status == 200, body
        return {t["id"]: t["status"] for t in body}

    def branches(self) -> set[str]:
        return set(git(self.root, "branch", "--format=%(refname:short)").split())


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("owned")
    root = make_repo(base)
    ticket(root, "f1", id="F1", title="Fails", description="exit 3")
    ticket(root, "b1", id="B1", title="Needs the one that fails", depends_on=["F1"],
           description="write out/b1.txt")
    env = _env(base)
    first = run_cli(root, env, "run", "--until-idle")
    assert_idle_exit(root, first.returncode, first.stdout + first.stderr)
    assert tasks(root)["B1"].status == "blocked_by_failed_dep"
    project = Project(root, base, env)
    with served(project) as url:
        opened = []
        for title in ("Open one", "Open two"):
            status, body = api(url, "POST", "/tasks", {"title": title,
                                                       "description": "stays open"})
            assert status in (200, 201), body
            opened.append(body["id"])
        yield Served(project, url, opened)


def _ours(real: Served, *args: str, token: str | None = TOKEN
          ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in real.project.env.items() if k != "BERNSTEIN_AUTH_TOKEN"}
    if token is not None:
        env["BERNSTEIN_AUTH_TOKEN"] = token
    out = subprocess.run([sys.executable, "-m", "console", *args], capture_output=True,
                         text=True, env=env, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert TOKEN not in out.stdout + out.stderr
    return out


def test_a_served_project_is_owned_without_a_pid_file(real: Served) -> None:
    assert not (real.root / ".sdd" / "runtime" / "server.pid").exists()  # 3.23.0 writes none
    owner = bernstein_owner(SddPaths(real.root))
    assert owner is not None and owner.url == real.url and owner.what == "bernstein server"
    token = "" if os.environ.get("BERNSTEIN_AUTH_TOKEN") else " --token-file FILE"
    assert owner.attach("cancel X") == f"bernstein-tui --server {real.url}{token} cancel X"


def test_local_writes_there_exit_2_naming_the_server_command(real: Served) -> None:
    before = real.statuses()
    task = real.opened[0]
    for args, command in ((("cancel", task), f"cancel {task}"), (("retry", task),
                                                                 f"retry {task}"),
                          (("run", "--until-idle"), "")):
        out = _ours(real, "-C", str(real.root), *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        line = out.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert f"bernstein-tui --server {real.url}" in line, line
        assert line.endswith(command) if command else line.endswith(real.url), line
    assert real.statuses() == before  # the server still has them as they were


def test_the_console_starts_no_engine_and_changes_nothing(real: Served) -> None:
    from console.tui.app import ConsoleApp
    from console.tui.widgets.status_bar import StatusBar

    before, branches = real.statuses(), real.branches()

    async def scenario() -> tuple[str, object]:
        app = ConsoleApp(real.root, read_only=False, engine=True)
        async with app.run_test(size=(160, 40)) as pilot:
            deadline = time.monotonic() + 60
            while "--server" not in app.query_one(StatusBar).engine_line:
                assert time.monotonic() < deadline, app.query_one(StatusBar).engine_line
                await pilot.pause(0.2)
            await pilot.pause(5.0)  # what an engine would have claimed by now
            return app.query_one(StatusBar).engine_line, app.engine

    line, engine = asyncio.run(scenario())
    assert engine is None
    assert "watching only" in line and f"bernstein-tui --server {real.url}" in line
    assert "bernstein server" in line
    after = real.statuses()
    assert after == before and all(after[t] == "open" for t in real.opened)
    assert real.branches() == branches


def test_a_wrong_token_exits_2_for_every_command(real: Served) -> None:
    for args in (("status",), ("retry", real.opened[0]), ("cancel", real.opened[0])):
        out = _ours(real, "--server", real.url, *args, token="wrong-" + TOKEN)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "token rejected (401)" in out.stderr, out.stderr
    assert all(real.statuses()[t] == "open" for t in real.opened)


def test_z_drains_and_resumes_the_real_server(real: Served) -> None:
    from console.cli.remote import remote_console_parts
    from console.tui.app import ConsoleApp
    from console.tui.widgets.status_bar import StatusBar

    def draining() -> bool:
        status, body = api(real.url, "GET", "/drain")
        assert status == 200, body
        return body["draining"]

    assert draining() is False

    async def scenario() -> list[tuple[bool, str]]:
        client = ServerClient(real.url, token=TOKEN)
        source, control = remote_console_parts(client, None, False)
        app = ConsoleApp(real.root, read_only=False, engine=False, source=source,
                         control=control)
        seen = []
        async with app.run_test(size=(200, 40)) as pilot:
            deadline = time.monotonic() + 30
            while not source.loaded.is_set():
                assert time.monotonic() < deadline
                await pilot.pause(0.2)
            for _ in range(2):
                was = draining()
                await pilot.press("z")
                deadline = time.monotonic() + 20
                while draining() == was:
                    assert time.monotonic() < deadline, "z changed nothing on the server"
                    await pilot.pause(0.2)
                await pilot.pause(0.5)
                seen.append((draining(), app.query_one(StatusBar).engine_line))
        return seen

    (first, first_line), (second, second_line) = asyncio.run(scenario())
    assert first is True and "DRAINING" in first_line
    assert second is False and "DRAINING" not in second_line


def test_a_blocked_by_failed_dep_task_causes_no_resync_loop(real: Served) -> None:
    status, counts = api(real.url, "GET", "/tasks/counts")
    assert status == 200
    statuses = real.statuses()
    assert "blocked_by_failed_dep" in statuses.values()
    assert counts["blocked_by_failed_dep"] == 0 and counts["total"] == len(statuses)  # 3.23.0
    source = RemoteSource(ServerClient(real.url, token=TOKEN))
    source.start(lambda delta: None)
    try:
        assert source.loaded.wait(30)
        deadline = time.monotonic() + 30
        while not source.health.live:  # its connect re-syncs once: events may have been lost
            assert time.monotonic() < deadline, source.health
            time.sleep(0.1)
        time.sleep(1.0)
        first = source.resyncs
        time.sleep(12.5)  # two /tasks/counts checks at least
        assert source.counts_agree()
        assert source.resyncs == first, f"{source.resyncs - first} full re-syncs in 12 s"
    finally:
        source.stop()
