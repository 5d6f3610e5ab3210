"""`--server` parity (#17.3) on the stand-in server: z reads GET /drain and toggles, the
header says DRAINING, a 409 says which of its two meanings it has, a rejected token
exits 2 for every command, and 3.23.0's /tasks/counts (no blocked_by_failed_dep) causes
no re-sync loop. tests/test_ownership_real.py checks the same against Bernstein 3.23.0."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.remote.answers import meaning
from console.remote.client import ServerClient, ServerError
from console.remote.control import RemoteControl
from console.remote.source import RemoteSource, counts_match
from tests.bernstein_server import FakeBernstein
from tests.test_remote import TOKEN, cli, free_port, wait_for


@pytest.fixture
def server() -> Iterator[FakeBernstein]:
    fake = FakeBernstein(TOKEN).start()
    yield fake
    fake.stop()


def test_toggle_drain_reads_get_drain_and_flips(server: FakeBernstein) -> None:
    client = ServerClient(server.url, token=TOKEN, timeout=5)
    said: list[bool] = []
    control = RemoteControl(client, on_drain=said.append)
    first = control.toggle_drain()
    assert first.ok and "drains" in first.message and server.draining is True
    second = control.toggle_drain()
    assert second.ok and "accepts claims again" in second.message and server.draining is False
    assert said == [True, False]
    reads = [path for method, path, _ in server.requests if method == "GET"]
    assert reads.count("/drain") == 2  # each toggle read the server's own state first
    server.draining = True  # drained by someone else: z resumes it
    assert control.toggle_drain().ok and server.draining is False
    client.close()


def test_the_header_shows_draining_from_the_server(server: FakeBernstein) -> None:
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), events=False)
    source.check_drain()
    assert source.health.draining is False and "DRAINING" not in source.health.line()
    server.draining = True
    source.check_drain()
    assert source.health.draining is True and "DRAINING" in source.health.line()
    server.inject("GET", "/drain", 404, "Not Found")  # a server without the route
    source.check_drain()
    assert source.health.draining is True  # unknown now: what was last read stays
    source.stop()


def test_the_console_z_drains_and_resumes(server: FakeBernstein, tmp_path: Path) -> None:
    from console.cli.remote import remote_console_parts
    from console.tui.app import ConsoleApp
    from console.tui.widgets.status_bar import StatusBar

    server.add("One")

    async def scenario() -> list[tuple[bool, str]]:
        source, control = remote_console_parts(ServerClient(server.url, token=TOKEN,
                                                            timeout=5), None, False)
        app = ConsoleApp(tmp_path, read_only=False, engine=False, source=source,
                         control=control)
        seen = []
        async with app.run_test(size=(200, 40)) as pilot:
            while not source.loaded.is_set():
                await pilot.pause(0.05)
            for _ in range(2):
                was = server.draining
                await pilot.press("z")
                deadline = time.monotonic() + 10
                while server.draining == was:
                    assert time.monotonic() < deadline
                    await pilot.pause(0.05)
                await pilot.pause(0.3)
                seen.append((server.draining, app.query_one(StatusBar).engine_line))
        return seen

    (first, line1), (second, line2) = asyncio.run(scenario())
    assert first is True and "DRAINING" in line1
    assert second is False and "DRAINING" not in line2


def test_each_409_says_what_it_means(server: FakeBernstein) -> None:
    # the bodies Bernstein 3.23.0 gives (core/tasks/task_store_core.py, lifecycle.py)
    version = meaning(409, "Version conflict: task ab12 is at version 3, expected 2")
    assert version.startswith("version conflict: the task changed meanwhile (409)")
    for refused in ("Task 'ab12' cannot be cancelled from status 'done'",
                    "Illegal task transition: 'done' -> 'cancelled' (entity ab12)",
                    "task ab12 has unresolved dependencies"):
        text = meaning(409, refused)
        assert text.startswith("the server refuses this in the task's current state (409)")
        assert refused in text
    assert "nonce" in meaning(409, "NONCE_MISMATCH")
    task_id = server.add("Done already", "done")
    server.inject("POST", f"/tasks/{task_id}/cancel", 409,
                  f"Task '{task_id}' cannot be cancelled from status 'done'")
    outcome = RemoteControl(ServerClient(server.url, token=TOKEN, timeout=5)).cancel(
        task_id, "no")
    assert not outcome.ok and "refuses this in the task's current state" in outcome.message


def test_a_rejected_token_exits_2_for_every_command(server: FakeBernstein) -> None:
    task_id = server.add("T", "failed")
    for args in (("status",), ("retry", task_id), ("cancel", task_id), ("escalate", task_id),
                 ("pause",), ("resume",), ()):
        out = cli(server.url, *args, token="wrong-" + TOKEN)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "token rejected" in out.stderr and TOKEN not in out.stderr
        assert out.stderr.count("\n") == 1
    assert server.tasks[task_id]["status"] == "failed" and not server.draining
    unreachable = cli(f"http://127.0.0.1:{free_port()}", "pause")
    assert unreachable.returncode == 2 and "connection refused" in unreachable.stderr


def test_counts_are_compared_only_on_what_counts_reports() -> None:
    # 3.23.0: blocked_by_failed_dep always 0 in /tasks/counts, but counted in total
    counts = {"open": 1, "failed": 1, "blocked_by_failed_dep": 0, "done": 0, "total": 3}
    assert counts_match(counts, {"open": 1, "failed": 1, "blocked_by_failed_dep": 1}, 3)
    assert not counts_match(counts, {"open": 2, "failed": 1}, 3)  # a real difference
    assert not counts_match(counts, {"open": 1, "failed": 1, "blocked_by_failed_dep": 1}, 4)
    assert not counts_match({**counts, "total": 2},
                            {"open": 1, "failed": 1, "blocked_by_failed_dep": 1}, 3)
    older = {"open": 1, "total": 2}  # a server that does not know a state at all
    assert counts_match(older, {"open": 1, "refused": 1}, 2)


def test_no_resync_loop_with_a_blocked_by_failed_dep_task(server: FakeBernstein) -> None:
    server.add("Fails", "failed")
    server.add("Stranded", "blocked_by_failed_dep")
    assert server.counts()["blocked_by_failed_dep"] == 0  # as 3.23.0 answers
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), poll_s=0.1,
                          monitor_s=0.2, backoff_s=0.05)
    source.start(lambda delta: None)
    try:
        wait_for(lambda: source.loaded.is_set() and source.health.live
                 and source.resyncs >= 2)
        first = source.resyncs
        time.sleep(2.0)  # ten /tasks/counts checks
        assert source.resyncs == first
        full_reads = [p for m, p, _ in server.requests if m == "GET" and p.startswith("/tasks?")]
        server.muted = True  # a change the stream misses: counts disagree, one re-sync
        server.add("Silent")
        wait_for(lambda: source.resyncs > first)
        assert len([p for m, p, _ in server.requests
                    if m == "GET" and p.startswith("/tasks?")]) > len(full_reads)
    finally:
        source.stop()


def test_a_409_error_names_its_kind_through_the_client(server: FakeBernstein) -> None:
    task_id = server.add("T")
    server.inject("PATCH", f"/tasks/{task_id}", 409,
                  f"Version conflict: task {task_id} is at version 2, expected 1")
    client = ServerClient(server.url, token=TOKEN, timeout=5)
    with pytest.raises(ServerError) as conflict:
        client.patch_task(task_id, {"model": "opus"})
    assert conflict.value.status == 409 and "version conflict" in str(conflict.value)
    client.close()
