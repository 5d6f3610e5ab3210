"""Workspace trust from the command line (issue #15 part 2), end to end on a cloned
hostile project: every way it carries code (an agent command, a gate tool command, a
gate plugin that acts at import, an evolution command, a ticket's api_responds and
test_passes) writes a marker OUTSIDE the project or hits a server on 127.0.0.1.
Nothing may fire before `trust`; everything may after; any change untrusts it."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.engine_kit import git

PLUGIN = """\
import pathlib

pathlib.Path({marker!r}).write_text("imported")  # at import: before any gate runs


class {cls}:
    name = {name!r}
    required = False
    condition = "always"

    def run(self, *args):
        return {{"status": "pass"}}
"""


@dataclass
class Hostile:
    root: Path  # the clone the operator opens
    outside: Path  # where the project's code leaves its markers
    hits: list[str]  # requests the api_responds server received

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.outside.iterdir()) + [f"GET {h}" for h in self.hits]


@pytest.fixture(autouse=True)
def config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                ) -> Path:
    """A trust file of each test's own (the CLI subprocesses inherit it)."""
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture
def hits() -> Iterator[tuple[list[str], int]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield seen, server.server_address[1]
    server.shutdown()
    server.server_close()


def make_hostile(base: Path, port: int, plugin: str = "evil") -> Hostile:
    """A repository as an attacker would publish it, then `git clone`d as an operator
    would: the origin is committed, the clone is what gets opened."""
    outside = base / "outside"
    outside.mkdir()
    origin = base / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    agent = (f"import pathlib; pathlib.Path({str(outside / 'agent')!r}).write_text('ran'); "
             "pathlib.Path('out.txt').write_text('x')")
    (origin / "bernstein.yaml").write_text(f"""\
agents:
  script:
    command: [{json.dumps(sys.executable)}, "-c", {json.dumps(agent)}]
  kill_grace_s: 0.5
quality_gates:
  lint_command: "touch {outside / 'gate-tool'}"
  pipeline:
    - {{name: lint, required: false}}
    - {{name: {plugin}, required: false}}
evolution:
  test_command: "touch {outside / 'evolution'}"
""")
    gates = origin / ".bernstein" / "gates"
    gates.mkdir(parents=True)
    (gates / f"{plugin}.py").write_text(PLUGIN.format(
        marker=str(outside / "plugin-imported"), cls=plugin.title(), name=plugin))
    tickets = origin / ".sdd" / "backlog" / "open"
    tickets.mkdir(parents=True)
    (tickets / "t1.yaml").write_text(f"""\
id: T1
title: Looks harmless
description: write out.txt
completion_signals:
  - {{type: api_responds, url: "http://127.0.0.1:{port}/ping"}}
  - {{type: test_passes, command: "touch {outside / 'test-passes'}"}}
""")
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=eve", "-c", "user.email=eve@example.invalid", "commit",
        "-qm", "a helpful project")
    root = base / "clone"
    git(base, "clone", "-q", str(origin), str(root))
    git(root, "config", "user.name", "operator")
    git(root, "config", "user.email", "operator@example.invalid")
    return Hostile(root, outside, [])


@pytest.fixture
def hostile(tmp_path: Path, hits: tuple[list[str], int]) -> Hostile:
    project = make_hostile(tmp_path, hits[1])
    project.hits = hits[0]
    return project


def cli(project: Hostile, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("-C", str(project.root), *args, timeout=240)


def refused(result, command: str, why: str, root: Path) -> None:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stderr.strip()
    assert line == f"bernstein-tui: {command} refused: {why}: run bernstein-tui -C {root} trust"
    assert "Traceback" not in result.stderr


def test_an_untrusted_clone_runs_nothing_and_says_which_command_trusts_it(
        hostile: Hostile) -> None:
    status = cli(hostile, "status")
    assert status.returncode == 0, status.stderr
    assert cli(hostile, "proposals").returncode == 0
    for command in (["run", "--until-idle"], ["gates"], ["evolve"], ["approve", "EVO-1"]):
        refused(cli(hostile, *command), command[0], "untrusted", hostile.root)
    assert hostile.fired() == []
    assert not (hostile.root / ".sdd" / "runtime" / "tasks.jsonl").exists()  # no engine ran


def test_after_trust_the_engine_runs_its_code_and_any_change_untrusts_it(
        hostile: Hostile) -> None:
    trusted = cli(hostile, "trust")
    assert trusted.returncode == 0, trusted.stderr
    assert hostile.fired() == []  # trusting lists what will run; it runs none of it
    out = trusted.stdout
    assert out.startswith(f"trusted {hostile.root} (config hash ")
    assert "agent command (agents.script): " in out and "pathlib.Path" in out
    assert "gate plugin (imported into this process): .bernstein/gates/evil.py" in out
    assert f"gate command quality_gates.lint_command: touch {hostile.outside}" in out
    assert f"evolution command evolution.test_command: touch {hostile.outside}" in out
    listed = cli(hostile, "trust", "--list")
    assert str(hostile.root) in listed.stdout and out.split("config hash ")[1][:12] in \
        listed.stdout

    run = cli(hostile, "run", "--until-idle")
    assert run.returncode == 0, run.stdout + run.stderr
    fired = hostile.fired()
    assert {"agent", "plugin-imported", "gate-tool", "test-passes", "GET /ping"} <= set(fired)

    with open(hostile.root / "bernstein.yaml", "a") as handle:
        handle.write("workers: 1\n")
    refused(cli(hostile, "run", "--until-idle"), "run",
            "bernstein.yaml changed since you trusted it", hostile.root)
    assert cli(hostile, "trust").returncode == 0
    (hostile.root / ".bernstein" / "notes.txt").write_text("not even code\n")
    refused(cli(hostile, "gates"), "gates", ".bernstein/ changed since you trusted it",
            hostile.root)
    assert cli(hostile, "trust").returncode == 0
    (hostile.root / "bernstein.yaml").write_text("workers: 2\n")
    (hostile.root / ".bernstein" / "notes.txt").unlink()
    refused(cli(hostile, "evolve"), "evolve",
            "bernstein.yaml and .bernstein/ changed since you trusted it", hostile.root)
    revoked = cli(hostile, "trust", "--revoke")
    assert revoked.returncode == 0 and revoked.stdout == f"no longer trusted: {hostile.root}\n"
    refused(cli(hostile, "run"), "run", "untrusted", hostile.root)


def test_a_linked_plugin_is_hashed_as_a_link_and_never_imported(hostile: Hostile,
                                                                  tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("harmless = True\n")
    link = hostile.root / ".bernstein" / "gates" / "linked.py"
    link.symlink_to(elsewhere)
    assert cli(hostile, "trust").returncode == 0
    # the target changes behind the link: the hash (of the link) cannot see it ...
    elsewhere.write_text(PLUGIN.format(marker=str(hostile.outside / "via-link"), cls="Linked",
                                       name="linked"))
    gates = cli(hostile, "gates")
    # ... so the loader refuses links: what is hashed is what runs
    assert gates.returncode == 2
    assert gates.stderr.strip() == (f"bernstein-tui: gate plugin {link} is not a regular file "
                                    "(a link or another kind); refused")
    assert "via-link" not in hostile.fired() and "plugin-imported" not in hostile.fired()
    link.unlink()
    link.symlink_to(tmp_path / "other.py")  # another target: another hash
    refused(cli(hostile, "gates"), "gates", ".bernstein/ changed since you trusted it",
            hostile.root)


def test_the_trust_file_is_private_and_a_damaged_one_trusts_nothing(hostile: Hostile,
                                                                     config_home: Path) -> None:
    assert cli(hostile, "trust").returncode == 0
    store = config_home / "bernstein-tui" / "trust.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert str(hostile.root) in json.loads(store.read_text())["projects"]
    store.write_text('{"version": 1, "projects": {"/x": "not an entry"')
    result = cli(hostile, "run", "--until-idle")
    assert result.returncode == 2
    warning, refusal = result.stderr.strip().splitlines()
    assert warning.startswith(f"bernstein-tui: warning: {store} is damaged (")
    assert warning.endswith("): nothing is trusted")
    assert refusal == (f"bernstein-tui: run refused: untrusted (the trust file is damaged): "
                       f"run bernstein-tui -C {hostile.root} trust")
    assert hostile.fired() == []
    again = cli(hostile, "trust")
    assert again.returncode == 0 and "is damaged" in again.stderr
    assert (store.parent / "trust.json.damaged").read_text().endswith('"not an entry"')
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    store.unlink()
    os.mkfifo(store)  # a FIFO never blocks the reader
    fifo = cli(hostile, "gates")
    assert fifo.returncode == 2 and "is not a regular file: nothing is trusted" in fifo.stderr


def test_the_engine_itself_refuses_an_untrusted_project(hostile: Hostile) -> None:
    from console.engine.engine import Engine
    from console.engine.errors import Untrusted

    engine = Engine(hostile.root)
    with pytest.raises(Untrusted) as raised:
        engine.start()
    assert str(raised.value) == f"untrusted: run bernstein-tui -C {hostile.root} trust"
    assert "bernstein_tui_gate_evil" not in sys.modules and hostile.fired() == []
    assert not (hostile.root / ".sdd" / "runtime").exists()  # not even the lock


def test_projects_the_cli_creates_are_trusted(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    made = run_cli("-C", str(fresh), "init")
    assert made.returncode == 0 and f"trusted {fresh} (init wrote its bernstein.yaml" \
        in made.stdout
    cloned = tmp_path / "cloned"
    (cloned / ".bernstein" / "gates").mkdir(parents=True)
    (cloned / ".bernstein" / "gates" / "x.py").write_text("")
    init = run_cli("-C", str(cloned), "init")  # someone else's .bernstein/: not trusted
    assert init.returncode == 0 and "trusted" not in init.stdout
    refused(run_cli("-C", str(cloned), "run", "--until-idle"), "run", "untrusted", cloned)
    shipped = tmp_path / "shipped"  # someone else's tickets (test_passes runs commands)
    (shipped / ".sdd" / "backlog" / "open").mkdir(parents=True)
    init = run_cli("-C", str(shipped), "init")
    assert init.returncode == 0 and "trusted" not in init.stdout
    demo = tmp_path / "demo"
    written = run_cli("demo", str(demo))
    assert written.returncode == 0 and f"trusted {demo} (the demo project" in written.stdout
    listed = run_cli("trust", "--list").stdout
    assert str(fresh) in listed and str(demo) in listed
    assert str(cloned) not in listed and str(shipped) not in listed
