"""Attaching to a Bernstein task server (issue #9): client, SSE, RemoteSource,
RemoteControl and `--server` on the command line, against a real HTTP server on
127.0.0.1 (tests/bernstein_server.py) that speaks the documented shapes."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.model import next_model
from console.remote import client as client_module
from console.remote.client import ServerClient, ServerError, normalise_url
from console.remote.control import RemoteControl
from console.remote.source import RemoteSource
from console.remote.sse import parse_events
from console.sdd.state import Delta
from tests.bernstein_server import FakeBernstein
from tests.conftest import run_cli

TOKEN = "tok-9f3c1a7e5d2b-secret"


@pytest.fixture
def server() -> Iterator[FakeBernstein]:
    fake = FakeBernstein(TOKEN).start()
    yield fake
    fake.stop()


@pytest.fixture
def client(server: FakeBernstein) -> Iterator[ServerClient]:
    c = ServerClient(server.url, token=TOKEN, timeout=5)
    yield c
    c.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check: Callable[[], object], timeout: float = 5.0) -> float:
    """Seconds until `check()` is truthy; fails the test after `timeout`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - start


class Deltas:
    """on_delta for a started source: every Delta, kept."""

    def __init__(self) -> None:
        self.items: list[Delta] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, delta: Delta) -> None:
        with self.lock:
            self.items.append(delta)

    def upserted(self, task_id: str, status: str | None = None) -> bool:
        with self.lock:
            return any(task_id in d.upserts and (status is None
                                                 or d.upserts[task_id].status == status)
                       for d in self.items)


@pytest.fixture
def live(server: FakeBernstein) -> Iterator[tuple[RemoteSource, Deltas]]:
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), poll_s=0.2,
                          backoff_s=0.05)
    deltas = Deltas()
    source.start(deltas, on_error=deltas.errors.append)
    # loaded, the stream live, and the re-sync its first connect makes is done
    wait_for(lambda: source.loaded.is_set() and source.health.live and source.resyncs >= 2)
    yield source, deltas
    source.stop()


# -- SSE frames --------------------------------------------------------------------

def test_sse_frames_follow_the_spec() -> None:
    lines = [": keepalive", "", "event: task_update", 'data: {"id": "a1", "status": "open"}',
             "", "data: line one", "data:line two", "id: 7", "retry: 100", "", "event: empty",
             "", "event: task_update", 'data: {"id": "half']
    events = list(parse_events(lines))
    assert [(e.event, e.data, e.id) for e in events] == [
        ("task_update", '{"id": "a1", "status": "open"}', None),
        ("message", "line one\nline two", "7"),
    ]  # the comment, the data-less frame and the unfinished last frame are no events
    assert events[0].json() == {"id": "a1", "status": "open"}
    assert events[1].json() is None


# -- the client --------------------------------------------------------------------

def test_tasks_come_as_a_bare_list_or_an_envelope_when_paging(
        server: FakeBernstein, client: ServerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [server.add(f"T{i}") for i in range(5)]
    bare, total = client.tasks_page()
    assert [t["id"] for t in bare] == ids and total is None
    page, total = client.tasks_page(limit=2, offset=2)
    assert [t["id"] for t in page] == ids[2:4] and total == 5
    monkeypatch.setattr(client_module, "PAGE", 2)
    assert [t["id"] for t in client.all_tasks()] == ids
    assert [p for p in server.paths("GET") if p.split("?")[0] == "/tasks"] == [
        "/tasks", "/tasks?limit=2&offset=2",
        "/tasks?limit=2&offset=0", "/tasks?limit=2&offset=2", "/tasks?limit=2&offset=4"]


def test_errors_name_the_url_and_the_meaning(server: FakeBernstein,
                                            client: ServerClient) -> None:
    anonymous = ServerClient(server.url, timeout=5)
    wrong = ServerClient(server.url, token="not-the-token", timeout=5)
    try:
        assert anonymous.health()["status"] == "ok"  # /health is public
        with pytest.raises(ServerError) as missing:
            anonymous.counts()
        assert missing.value.status == 401
        assert "token missing (401)" in str(missing.value)
        assert "BERNSTEIN_AUTH_TOKEN" in str(missing.value)
        with pytest.raises(ServerError) as rejected:
            wrong.counts()
        assert str(rejected.value) == (f"GET {server.url}/tasks/counts: token rejected or "
                                       "tenant not allowed (403) (Invalid auth token)")
        server.wrong_token_status = 401  # what 3.23.0 answers
        with pytest.raises(ServerError) as rejected_401:
            wrong.counts()
        assert str(rejected_401.value).startswith(
            f"GET {server.url}/tasks/counts: token rejected (401) "
            "(Invalid or expired authentication token)")
    finally:
        anonymous.close()
        wrong.close()
    task_id = server.add("T")
    server.inject("PATCH", f"/tasks/{task_id}", 409, "version conflict")
    server.inject("GET", "/tasks/counts", 429, "too many requests", {"Retry-After": "7"})
    server.inject("POST", "/tasks/batch-ops", 503, "Server is draining -- no new claims")
    with pytest.raises(ServerError) as conflict:
        client.patch_task(task_id, {"model": "opus"})
    assert "task changed meanwhile (409) (version conflict)" in str(conflict.value)
    with pytest.raises(ServerError) as limited:
        client.counts()
    assert limited.value.retry_after == 7 and "retry after 7 s" in str(limited.value)
    with pytest.raises(ServerError) as draining:
        client.batch_ops("retry", [task_id])
    assert "server draining" in str(draining.value) and draining.value.status == 503
    with pytest.raises(ServerError) as invalid:
        client.batch_ops("explode", [task_id])
    assert "refused the request as invalid (422)" in str(invalid.value)
    assert "action: Input should be" in str(invalid.value)
    with pytest.raises(ServerError) as no_route:
        client.request("POST", f"/tasks/{task_id}/retry")
    assert no_route.value.status == 404 and "not found (404) (Not Found)" in str(no_route.value)
    port = free_port()
    refused = ServerClient(f"http://127.0.0.1:{port}", token=TOKEN, timeout=2)
    with pytest.raises(ServerError) as down:
        refused.counts()
    assert str(down.value) == f"http://127.0.0.1:{port}/tasks/counts: connection refused"
    assert down.value.unreachable
    refused.close()


def test_a_server_url_is_checked_and_the_token_stays_out_of_reprs(
        server: FakeBernstein, client: ServerClient) -> None:
    assert normalise_url("http://h:8052/") == "http://h:8052"
    for bad in ("ftp://h", "h:8052", "http://user:pw@h", "http://h/?q=1"):
        with pytest.raises(ValueError):
            normalise_url(bad)
    assert TOKEN not in repr(client) and "token=True" in repr(client)
    tenant = ServerClient(server.url, token=TOKEN, tenant="acme", timeout=5)
    tenant.counts()
    tenant.close()
    headers = server.requests[-1][2]
    assert headers["x-tenant-id"] == "acme" and headers["authorization"] == f"Bearer {TOKEN}"


# -- the control -------------------------------------------------------------------

def test_retry_goes_through_batch_ops_and_the_task_is_open_again(
        server: FakeBernstein, client: ServerClient) -> None:
    failed = server.add("Flaky", "failed", result_summary="tests red")
    running = server.add("Busy", "claimed")
    control = RemoteControl(client)
    outcome = control.retry(failed)
    assert outcome.ok, outcome.message
    assert server.tasks[failed]["status"] == "open" and server.tasks[failed]["retry_count"] == 1
    refused = control.retry(running)
    assert not refused.ok
    assert "is not in failed state (current: claimed)" in refused.message
    missing = control.retry("000000000000")
    assert not missing.ok and "not found" in missing.message
    assert not any(p.endswith("/retry") for p in server.paths())  # there is no such route


def test_escalate_patches_the_next_model_and_reopens_a_failed_task(
        server: FakeBernstein, client: ServerClient) -> None:
    cheap = server.add("Cheap", "open", model="haiku")
    broken = server.add("Broken", "failed", model="sonnet")
    top = server.add("Top", "open", model="opus")
    control = RemoteControl(client)
    assert control.escalate(cheap).message == (
        f"task {cheap}: the next attempt runs on sonnet (was haiku)")
    assert server.tasks[cheap]["model"] == "sonnet"
    assert server.tasks[cheap]["metadata"] == {"escalation_ladder_step": 1}
    outcome = control.escalate(broken)
    assert outcome.ok and outcome.message == f"task {broken} reopened on opus (was sonnet)"
    assert server.tasks[broken]["status"] == "open" and server.tasks[broken]["model"] == "opus"
    at_top = control.escalate(top)
    assert not at_top.ok and "already runs on the top tier (opus)" in at_top.message
    assert next_model(None, ("a", "b", "c")) == ("b", 1)
    assert next_model("claude-opus-4", ("haiku", "sonnet", "opus")) is None


def test_escalate_falls_back_to_the_model_alone_on_a_server_that_refuses_the_step() -> None:
    strict = FakeBernstein(TOKEN, strict_patch=True).start()
    try:
        task_id = strict.add("Old server", "open", model="haiku")
        client = ServerClient(strict.url, token=TOKEN, timeout=5)
        outcome = RemoteControl(client).escalate(task_id)
        client.close()
        assert outcome.ok, outcome.message
        assert strict.tasks[task_id]["model"] == "sonnet"
        patches = [path for method, path, _ in strict.requests if method == "PATCH"]
        assert patches == [f"/tasks/{task_id}", f"/tasks/{task_id}"]  # refused, then model only
    finally:
        strict.stop()


def test_a_409_refreshes_the_task_and_says_so(server: FakeBernstein,
                                              live: tuple[RemoteSource, Deltas]) -> None:
    source, _deltas = live
    task_id = server.add("Contended", "open", model="haiku")
    wait_for(lambda: task_id in source.state.tasks)
    server.muted = True  # the change below reaches the console only through the refresh
    server.mutate(task_id, status="claimed")
    server.inject("PATCH", f"/tasks/{task_id}", 409, f"task {task_id} changed (version 2)")
    control = RemoteControl(source.client, refresh=source.refresh_task)
    outcome = control.escalate(task_id)
    assert not outcome.ok
    assert outcome.message.endswith("task changed meanwhile (409) "
                                    f"(task {task_id} changed (version 2)) — refreshed")
    with source.lock:
        assert source.state.tasks[task_id].status == "claimed"


def test_cancel_approvals_drain_and_what_has_no_route(server: FakeBernstein,
                                                      client: ServerClient) -> None:
    task_id = server.add("Obsolete")
    control = RemoteControl(client)
    assert control.cancel(task_id, "not needed").ok
    assert server.tasks[task_id]["status"] == "cancelled"
    gone = control.cancel("000000000000", "x")
    assert not gone.ok and "not found (404)" in gone.message
    server.approvals["a1b2c3d4e5f6"] = {"task_id": "a1b2c3d4e5f6", "task_title": "Gated merge",
                                        "session_id": "s1", "diff": "", "test_summary": "ok",
                                        "mechanism": "task_review"}
    server.approvals["0f0f0f0f0f0f"] = {"task_id": "0f0f0f0f0f0f", "task_title": "Spawn",
                                        "mechanism": "pre_spawn"}
    assert control.approve("a1b2c3d4e5f6", "looks good").message == (
        f"task a1b2c3d4e5f6: approved on {server.url}")
    assert control.reject("0f0f0f0f0f0f", "not yet").ok
    assert server.decided == {"a1b2c3d4e5f6": "approve", "0f0f0f0f0f0f": "reject"}
    proposal = control.approve("prop-routing-01")
    assert not proposal.ok and "bernstein evolve approve prop-routing-01" in proposal.message
    assert control.pause().ok and server.draining
    assert control.resume().ok and not server.draining
    evolve = control.evolve()
    assert not evolve.ok and "no route" in evolve.message


# -- the source --------------------------------------------------------------------

def test_the_source_loads_follows_events_and_reports_health(
        server: FakeBernstein) -> None:
    done = server.add("Done", "done", completion_signals=[
        {"type": "path_exists", "value": "a.txt"}, {"type": "schema_valid", "value": "x"}])
    server.gates[done] = {"task_id": done, "overall_pass": True, "results": [],
                          "total_duration_ms": 5, "timestamp": time.time()}
    server.approvals["a1"] = {"task_id": "a1", "task_title": "Gated"}
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), poll_s=0.2)
    deltas = Deltas()
    assert not source.exists and source.describe() == server.url
    source.start(deltas, on_error=deltas.errors.append)
    try:
        wait_for(lambda: source.loaded.is_set() and source.health.live)
        assert source.exists
        with source.lock:
            task = source.state.tasks[done]
            assert [s.type for s in task.completion_signals] == ["path_exists"]
            assert task.extra["server_completion_signals"][1]["type"] == "schema_valid"
            assert done in source.state.gate_reports
            assert list(source.state.approvals) == ["a1"]
            assert source.state.problems == []
        health = source.health
        assert health.status == "ok" and health.live and health.latency_ms is not None
        assert health.url == server.url and "events live" in health.line()
        assert any("server" in d.sections for d in deltas.items)
        new = server.add("Created through the API")
        assert wait_for(lambda: deltas.upserted(new, "open")) < 1.0
        server.mutate(new, status="claimed")
        assert wait_for(lambda: deltas.upserted(new, "claimed")) < 1.0
        assert deltas.errors == []
    finally:
        source.stop()


def test_a_stream_dropped_mid_frame_reconnects_and_resyncs_only_the_difference(
        server: FakeBernstein, live: tuple[RemoteSource, Deltas]) -> None:
    source, deltas = live
    keep = server.add("Unchanged")
    change = server.add("Changes while nobody listens")
    wait_for(lambda: deltas.upserted(change) and deltas.upserted(keep))
    syncs, connects = source.resyncs, server.stream_connects
    server.muted = True  # the server drops these events (a slow reader's fate)
    server.mutate(change, status="failed", result_summary="lost event")
    with deltas.lock:
        deltas.items.clear()
    server.muted = False
    server.drop_streams()
    wait_for(lambda: server.stream_connects > connects and source.health.live)
    wait_for(lambda: deltas.upserted(change, "failed"))  # sent once the re-sync is done
    assert source.resyncs > syncs
    with deltas.lock:
        upserted = set().union(*(d.upserts for d in deltas.items))
        removed = set().union(*(d.removed for d in deltas.items))
    assert upserted == {change} and removed == set()
    with source.lock:
        assert source.state.state_counts() == {s: n for s, n in server.counts().items()
                                               if n and s != "total"}


def test_stop_ends_a_live_stream_at_once(live: tuple[RemoteSource, Deltas]) -> None:
    source, _deltas = live
    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 1.0  # the blocked read is cut, not waited out
    assert source.stopping.is_set()
    assert not any(thread.is_alive() for thread in source._threads)


def test_the_source_polls_while_the_stream_is_down_and_notices_drift(
        server: FakeBernstein) -> None:
    task_id = server.add("Polled")
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), events=False,
                          poll_s=0.1)
    deltas = Deltas()
    source.start(deltas)
    try:
        wait_for(source.loaded.is_set)
        server.mutate(task_id, status="done")
        assert wait_for(lambda: deltas.upserted(task_id, "done")) < 1.0
    finally:
        source.stop()
    still = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), events=False)
    still.sync()
    assert still.counts_agree()
    server.add("Sneaked in")  # no stream, no poll: the counts tell
    assert not still.counts_agree()
    assert still.server_counts == server.counts()
    still.sync()
    assert still.counts_agree()
    still.client.close()


def test_an_unreachable_server_is_retried_and_said(tmp_path: Path) -> None:
    port = free_port()
    source = RemoteSource(ServerClient(f"http://127.0.0.1:{port}", timeout=1), poll_s=0.1)
    deltas = Deltas()
    source.start(deltas, on_error=deltas.errors.append)
    try:
        wait_for(lambda: deltas.errors)
        assert deltas.errors[0] == f"http://127.0.0.1:{port}/tasks: connection refused"
        assert source.health.status == "unreachable" and not source.exists
        assert not source.loaded.is_set()
        time.sleep(1.0)  # it keeps trying (with backoff), and says it once
        assert deltas.errors == [f"http://127.0.0.1:{port}/tasks: connection refused"]
    finally:
        source.stop()


# -- the command line --------------------------------------------------------------

def cli(server_url: str, *args: str, token: str | None = TOKEN, **env_extra: str):  # type: ignore[no-untyped-def]
    env = {"BERNSTEIN_AUTH_TOKEN": token} if token else {}
    env.update(env_extra)
    old = {k: os.environ.get(k) for k in ("BERNSTEIN_AUTH_TOKEN", *env_extra)}
    os.environ.pop("BERNSTEIN_AUTH_TOKEN", None)
    os.environ.update(env)
    try:
        return run_cli("--server", server_url, *args)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_cli_status_json_matches_the_server_counts(server: FakeBernstein) -> None:
    for status in ("open", "open", "failed", "done", "cancelled", "claimed", "blocked"):
        server.add(f"T {status}", status)
    out = cli(server.url, "status", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    counts = server.counts()
    assert summary["tasks"]["total"] == counts["total"] == 7
    assert summary["tasks"]["by_state"] == {s: n for s, n in counts.items()
                                            if n and s != "total"}
    assert summary["server"]["counts"] == counts and summary["server"]["health"] == "ok"
    text = cli(server.url, "status")
    assert text.returncode == 0 and "Tasks in" in text.stdout and server.url in text.stdout


def test_cli_retry_makes_a_failed_task_open_on_the_server(server: FakeBernstein) -> None:
    task_id = server.add("Flaky", "failed")
    out = cli(server.url, "retry", task_id)
    assert out.returncode == 0 and out.stdout.strip() == f"task {task_id} reopened on {server.url}"
    assert server.tasks[task_id]["status"] == "open"
    again = cli(server.url, "retry", task_id)
    assert again.returncode == 1 and "not in failed state (current: open)" in again.stderr
    escalate = cli(server.url, "escalate", task_id, "--model", "opus")
    assert escalate.returncode == 0 and server.tasks[task_id]["model"] == "opus"
    proposals = cli(server.url, "proposals")
    assert proposals.returncode == 2 and "not with --server" in proposals.stderr


def test_cli_errors_are_one_line_and_never_show_the_token(server: FakeBernstein,
                                                          tmp_path: Path) -> None:
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    bad_file = tmp_path / "bad-token"
    bad_file.write_text(TOKEN + " and more\n")
    runs = {
        "refused": cli(f"http://127.0.0.1:{port}", "status", "--json"),
        "retry-refused": cli(f"http://127.0.0.1:{port}", "retry", "abc"),
        "wrong-token": cli(server.url, "status", token="wrong-" + TOKEN),
        "no-token": cli(server.url, "cancel", "abc", token=None),
        "token-file": run_cli("--server", server.url, "--token-file", str(token_file),
                              "--tenant", "acme", "status"),
        "bad-token-file": run_cli("--server", server.url, "--token-file", str(bad_file),
                                  "status"),
        "bad-url": cli("localhost:8052", "status"),
        "insecure": cli(f"https://127.0.0.1:{port}", "--insecure", "status"),
    }
    for name, out in runs.items():
        assert TOKEN not in out.stdout + out.stderr, name
        assert "Traceback" not in out.stderr, name
    assert runs["refused"].returncode == 2
    assert runs["refused"].stderr == (f"bernstein-tui: http://127.0.0.1:{port}/tasks: "
                                      "connection refused\n")
    assert runs["retry-refused"].returncode == 2
    assert runs["wrong-token"].returncode == 2 and "token rejected" in runs["wrong-token"].stderr
    # a token not accepted is bad usage for every command (README), a missing one too
    assert runs["no-token"].returncode == 2 and "(401)" in runs["no-token"].stderr
    assert runs["token-file"].returncode == 0, runs["token-file"].stderr
    assert server.requests[-1][2]["x-tenant-id"] == "acme"
    assert runs["bad-token-file"].returncode == 2
    assert "characters an HTTP header cannot carry" in runs["bad-token-file"].stderr
    assert runs["bad-url"].returncode == 2 and "expected http://" in runs["bad-url"].stderr
    assert "TLS certificates are NOT verified" in runs["insecure"].stderr
    assert runs["insecure"].returncode == 2
    for out in runs.values():
        assert len(out.stderr.strip().splitlines()) <= 2  # the --insecure note + one line
    for args in (("--tenant", "x", "status"), ("--server", server.url, "init")):
        usage = run_cli(*args)
        assert usage.returncode == 2 and usage.stderr.count("\n") == 1


# -- a real Bernstein (skipped without BERNSTEIN_VENV) -----------------------------

@pytest.mark.skipif(not os.environ.get("BERNSTEIN_VENV"),
                    reason="set BERNSTEIN_VENV to a venv with `pip install bernstein==3.23.0` "
                           "(Python >= 3.12) to check against the real task server")
def test_against_a_real_bernstein_server() -> None:
    import subprocess

    script = Path(__file__).parent / "fixtures" / "check_real_bernstein.sh"
    import sys

    out = subprocess.run(["bash", str(script), os.environ["BERNSTEIN_VENV"]],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TUI_PYTHON": sys.executable})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ALL CHECKS PASSED" in out.stdout


async def test_the_console_on_a_server_follows_it_and_retries_from_the_keyboard(
        server: FakeBernstein, client: ServerClient, tmp_path: Path) -> None:
    from console.cli.remote import remote_console_parts
    from console.tui.app import ConsoleApp
    from console.tui.widgets.task_table import TaskTable
    from tests.test_tui import plain
    from tests.test_tui import wait_for as ui_wait

    failed = server.add("Flaky", "failed", result_summary="tests red")
    source, control = remote_console_parts(client, None, False)
    app = ConsoleApp(tmp_path, source=source, control=control)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(TaskTable)
        await ui_wait(pilot, lambda: table.task_ids == [failed])
        await ui_wait(pilot, lambda: "events live" in plain(app.query_one("#status")))
        assert server.url in plain(app.query_one("#status"))
        added = server.add("New from the API", "open")
        await ui_wait(pilot, lambda: added in table.task_ids, timeout=5)
        table.move_to(failed)
        await ui_wait(pilot, lambda: app.selected == failed)  # what the operator sees first
        await pilot.press("r")
        await ui_wait(pilot, lambda: server.tasks[failed]["status"] == "open")
        await ui_wait(pilot, lambda: table.cell(failed, "state") == "○ open", timeout=5)
