"""#32 point 6: moves and reads inside `.sdd/` cannot be redirected. A backlog directory
swapped for a link to a directory outside the project while the engine runs (between
taking a ticket and closing it, and again and again by another process while tickets
are closed) moves nothing outside, and the operator gets one clear line; a ticket that
is a link to a file outside is refused in one line and never read (its content appears
nowhere)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import MappingProxyType

from console.engine.backlog import close_ticket
from console.model import Task
from console.sdd.paths import SddPaths
from console.sdd.skeleton import init_project
from console.sdd.source import LocalSource
from tests.engine_kit import make_repo, tasks, ticket, until

SECRET = "SECRET-do-not-read-4c1d"


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _everything_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*")
                    if p.is_file() and not p.is_symlink() and ".git" not in p.parts)


def test_a_closed_dir_swapped_for_a_link_mid_run_moves_nothing_outside(tmp_path: Path
                                                                        ) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("the operator's\n")
    before = _files(victim)
    root = make_repo(tmp_path, config="cascade: {enabled: false}\n")
    ticket(root, "t1", id="T1", title="runs a while", description="sleep 3")
    run = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run",
                            "--until-idle"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        until("T1 taken", lambda: "T1" in tasks(root)
              and tasks(root)["T1"].status == "in_progress", timeout=60)
        closed = root / ".sdd" / "backlog" / "closed"
        assert (root / ".sdd" / "backlog" / "claimed" / "t1.yaml").is_file()
        closed.rename(tmp_path / "closed.away")  # as an agent in its worktree could
        closed.symlink_to(victim)
        output, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert tasks(root)["T1"].status == "done", output
    assert _files(victim) == before  # nothing moved outside
    assert (root / ".sdd" / "backlog" / "claimed" / "t1.yaml").is_file()  # it stays
    lines = [line for line in output.splitlines() if "backlog/closed" in line]
    assert len(lines) == 1 and "t1.yaml" in lines[0] and "symbolic link" in lines[0], output


EXCHANGER = textwrap.dedent("""
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    a, b, seconds = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), float(sys.argv[3])
    print("ready", flush=True)
    end, swaps = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
        swaps += 1
    if swaps % 2:
        libc.renameat2(-100, a, -100, b, 2)
    print(swaps, flush=True)
""")


def _exchange_works(tmp_path: Path) -> bool:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").symlink_to(tmp_path)
    libc = ctypes.CDLL(None, use_errno=True)
    ok = libc.renameat2(-100, os.fsencode(tmp_path / "x"), -100,
                        os.fsencode(tmp_path / "y"), 2) == 0
    return ok


def test_a_dir_swapped_back_and_forth_while_tickets_close_moves_nothing_outside(
        tmp_path: Path) -> None:
    """Another process exchanges backlog/closed with a link to a directory outside as
    fast as it can (atomically: renameat2 RENAME_EXCHANGE) while tickets are closed:
    a check of the path followed by a move of the path would lose some outside."""
    (tmp_path / "probe").mkdir()
    assert _exchange_works(tmp_path / "probe")
    victim = tmp_path / "victim"
    victim.mkdir()
    root = tmp_path / "project"
    init_project(root)
    backlog = root / ".sdd" / "backlog"
    (backlog / "closed").mkdir(exist_ok=True)
    (backlog / "closed.link").symlink_to(victim)
    count = 3000
    for index in range(count):
        (backlog / "claimed" / f"t{index}.yaml").write_text(f"title: t{index}\n")
    swapper = subprocess.Popen([sys.executable, "-c", EXCHANGER, str(backlog / "closed"),
                                str(backlog / "closed.link"), "60"],
                               stdout=subprocess.PIPE, text=True)
    paths = SddPaths(root)
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        for index in range(count):
            task = Task(id=f"T{index}", title="t", status="done",
                        metadata=MappingProxyType({"ticket": f"claimed/t{index}.yaml"}))
            close_ticket(paths, task)
    finally:
        swapper.kill()
        swapper.wait()
    if (backlog / "closed").is_symlink():  # killed mid-way: put the real one back
        os.rename(backlog / "closed", tmp_path / "link")
        os.rename(backlog / "closed.link", backlog / "closed")
    assert os.listdir(victim) == []  # not one ticket left the project
    kept = (os.listdir(backlog / "claimed") + os.listdir(backlog / "closed"))
    assert sorted(kept) == sorted(f"t{index}.yaml" for index in range(count))
    assert os.listdir(backlog / "closed")  # and the moves did happen, between the swaps


def test_a_ticket_that_is_a_link_is_refused_unread(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(f"title: {SECRET}\ndescription: exit 0\n")
    root = make_repo(tmp_path)
    link = root / ".sdd" / "backlog" / "open" / "evil.yaml"
    link.symlink_to(outside)
    ticket(root, "fine", id="F", title="fine", description="exit 0")
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle"], capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert SECRET not in output
    assert SECRET.encode() not in _everything_under(root)  # nowhere in the project
    assert sorted(tasks(root)) == ["F"] and tasks(root)["F"].status == "done"  # others flow
    lines = [line for line in output.splitlines() if "evil.yaml" in line]
    assert len(lines) == 1 and "symbolic link" in lines[0] and "not read" in lines[0], output
    assert link.is_symlink() and outside.read_text().startswith(f"title: {SECRET}")
    # and the console (watching, as `status` does) refuses it too, unread
    source = LocalSource(root)
    source.load()
    assert ".sdd/backlog/open/evil.yaml" not in source.state.tickets
    assert SECRET not in repr(source.state.tickets) + repr(source.state.problems)
    said = [p for p in source.state.problems if p.file == ".sdd/backlog/open/evil.yaml"]
    assert len(said) == 1 and "symbolic link" in said[0].reason


def _outside_jsons(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    victim = tmp_path / "victim-json"
    victim.mkdir()
    for index in range(12):
        (victim / f"operator{index}.json").write_text('{"the operator\'s": true}\n')
    return victim, _files(victim)


def test_a_linked_gate_cache_loses_no_file_of_the_operator(tmp_path: Path) -> None:
    """The gate cache drops its oldest entries: with `.sdd/caching/gates` swapped for a
    link to a directory of the operator's, none of theirs goes."""
    from console.engine.gates.cache import GateCache

    victim, before = _outside_jsons(tmp_path)
    root = tmp_path / "project"
    init_project(root)
    gates = root / ".sdd" / "caching" / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    cache = GateCache(gates, max_entries=2)
    gates.rmdir()
    gates.symlink_to(victim)  # after the cache was set up, as an agent could
    cache._trim()  # (what a put does every 50 writes)
    assert _files(victim) == before


def test_a_linked_pid_directory_loses_no_file_of_the_operator(tmp_path: Path) -> None:
    """A start reaps a dead engine's agents from runtime/pids/ and removes the files:
    with `runtime/pids` a link to a directory of the operator's, none of theirs goes."""
    from console.engine.events import EventLog
    from console.engine.orphans import reap_orphans

    victim, before = _outside_jsons(tmp_path)
    root = tmp_path / "project"
    init_project(root)
    pids = root / ".sdd" / "runtime" / "pids"
    if pids.exists():
        pids.rmdir()
    pids.symlink_to(victim)
    paths = SddPaths(root)
    assert reap_orphans(paths, EventLog(paths), git_wait_s=0) == []
    assert _files(victim) == before
