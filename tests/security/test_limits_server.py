"""Issue #16 part 2: a client with limits. `bernstein-tui --server URL status [--json]` and
the RemoteSource against a real hostile task server on 127.0.0.1 (hostile_server.py):
each answered in bounded time (the subprocess timeout is a hang guard, not a figure) and
bounded memory (the child's own peak RSS), with one line naming the route.
Speed and memory figures are in benchmarks/hostile_server.py, not here."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.remote import limits
from console.remote.bounded import LimitExceeded, bounded_lines
from console.remote.client import ServerClient, ServerError
from console.remote.source import RemoteSource
from tests.security.hostile_server import HUGE, MARKUP, HostileServer, Measured, run_measured

DEADLINE_S = 2  # BERNSTEIN_TUI_HTTP_DEADLINE_S for the runs here: a drip costs 2 s, not 10
HANG_GUARD_S = 120
MEMORY_CEILING_MB = 300  # far below what a hostile mode would cost without the limits


def status(url: str, *args: str, **env: str) -> Measured:
    return run_measured([sys.executable, "-m", "console", "--server", url, "status", *args],
                        env={**os.environ, limits.DEADLINE_ENV: str(DEADLINE_S), **env},
                        timeout=HANG_GUARD_S)


def one_line_error(out: Measured, route: str) -> str:
    """The run failed with exit 2 and exactly one stderr line naming the route."""
    assert out.returncode == 2, (out.returncode, out.stderr[-500:])
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bernstein-tui: "), out.stderr[-500:]
    assert "Traceback" not in out.stderr and route in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    server = HostileServer(request.param).start()
    yield server
    server.stop()


FAILING = [
    ({"/tasks": "drip-head"}, "/tasks", f"no complete answer within {DEADLINE_S} s"),
    ({"/tasks": "drip-body"}, "/tasks", f"no complete answer within {DEADLINE_S} s"),
    ({"/tasks": "huge"}, "/tasks", f"answer of {HUGE} bytes refused: over the limit (32 MB)"),
    ({"/tasks": "huge-chunked"}, "/tasks", "over the limit (32 MB)"),
    ({"/tasks/counts": "huge"}, "/tasks/counts", "refused: over the limit"),
    ({"/tasks/counts": "drip-head"}, "/tasks/counts", "no complete answer"),
    ({"/tasks": "markup"}, "/tasks", f"server error (500) ({MARKUP})"),
    ({r: "shapes" for r in ("/health", "/tasks", "/tasks/counts", "/tasks/archive",
                            "/approvals")}, "/tasks/counts", "expected a JSON object, got list"),
]


@pytest.mark.parametrize(("hostile", "route", "said"), FAILING, indirect=["hostile"],
                         ids=[f"{next(iter(m.values()))}@{r}" for m, r, _ in FAILING])
@pytest.mark.parametrize("form", ["--json", "text"])
def test_status_against_a_hostile_server_ends_with_one_line(
        hostile: HostileServer, route: str, said: str, form: str) -> None:
    out = status(hostile.url, *(["--json"] if form == "--json" else []))
    line = one_line_error(out, route)
    assert f"{hostile.url}{route}" in line and said in line, line
    assert out.stdout == ""
    assert out.peak_rss_mb < MEMORY_CEILING_MB, out.peak_rss_mb


@pytest.mark.parametrize("hostile", [{"/tasks": "paging-repeat"}], indirect=True)
def test_paging_stops_at_a_page_that_adds_nothing_new(hostile: HostileServer) -> None:
    out = status(hostile.url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tasks"]["total"] == 3  # three tasks, however often sent
    assert hostile.hits["/tasks"] == 2  # the page, and the same page again: then it stops


@pytest.mark.parametrize("hostile", [{"/tasks": "paging-fresh"}], indirect=True)
def test_paging_stops_at_what_counts_reported_plus_the_margin(hostile: HostileServer) -> None:
    out = status(hostile.url, "--json")
    assert out.returncode == 0, out.stderr
    read = json.loads(out.stdout)["tasks"]["total"]
    assert 3 + limits.PAGING_MARGIN <= read <= 3 + limits.PAGING_MARGIN + limits.PAGE
    assert hostile.hits["/tasks"] == read // limits.PAGE  # /tasks/counts said 3


@pytest.mark.parametrize("hostile", [{"/tasks": "paging-fresh",
                                      "/tasks/counts": "counts-huge"}], indirect=True)
def test_paging_never_passes_the_task_cap_whatever_counts_says(
        hostile: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("console.remote.client.MAX_REMOTE_TASKS", 2_000)
    client = ServerClient(hostile.url, timeout=DEADLINE_S)
    try:
        records = client.all_tasks()
    finally:
        client.close()
    assert len(records) == 2_000 and hostile.hits["/tasks"] == 4


@pytest.mark.parametrize("hostile", [{"/tasks": "shapes"}], indirect=True)
def test_wrong_shapes_in_the_task_list_are_problems_not_crashes(hostile: HostileServer) -> None:
    out = status(hostile.url, "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    summary = json.loads(out.stdout)
    assert summary["tasks"]["total"] == 1  # the one whole task; the rest are problems
    assert len(summary["problems"]) == 7
    assert all("\n" not in p["reason"] for p in summary["problems"])
    text = status(hostile.url)
    assert text.returncode == 0 and "Traceback" not in text.stderr


@pytest.mark.parametrize("hostile", [{"/tasks": "escapes"}], indirect=True)
def test_escape_sequences_in_titles_never_reach_the_terminal_as_escapes(
        hostile: HostileServer) -> None:
    for args in (("--json",), ()):
        out = status(hostile.url, *args)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout + out.stderr
    assert json.loads(status(hostile.url, "--json").stdout)["tasks"]["total"] == 7


@pytest.mark.parametrize("hostile", [{"/health": "drip-head"}], indirect=True)
def test_a_health_route_that_never_answers_leaves_status_answering(
        hostile: HostileServer) -> None:
    out = status(hostile.url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["server"]["health"] == "unreachable"


def test_limits_from_the_environment_are_checked(tmp_path: Path) -> None:
    with HostileServer({"/tasks": "huge-chunked"}) as server:
        small = status(server.url, "--json", **{limits.MAX_BODY_ENV: "1"})
        assert "over the limit (1 MB)" in one_line_error(small, "/tasks")
        bad = status(server.url, **{limits.DEADLINE_ENV: "soon"})
        assert bad.returncode == 2
        assert bad.stderr == (f"bernstein-tui: {limits.DEADLINE_ENV}=soon: expected a "
                              "positive number\n")


# -- the client and the stream directly -------------------------------------------------

def test_a_dripped_answer_ends_at_the_deadline_not_at_a_read_timeout() -> None:
    with HostileServer({"/tasks": "drip-head", "/health": "drip-body"}, drip_s=0.2) as server:
        client = ServerClient(server.url, timeout=1)
        try:
            assert client.counts()["total"] == 3  # a good answer first: the next request
            for call, route in ((client.all_tasks, "/tasks"), (client.health, "/health")):
                with pytest.raises(ServerError) as caught:  # on this client is cut all the same
                    call()
                assert route in str(caught.value)
                assert str(caught.value).endswith(": no complete answer within 1 s")
                assert caught.value.unreachable
        finally:
            client.close()


def test_a_retry_after_is_believed_up_to_its_limit() -> None:
    from console.remote.answers import retry_after_of

    def said(value: str) -> float | None:
        return retry_after_of(httpx.Response(429, headers={"retry-after": value}))

    assert said("7") == 7.0 and said("1e400") == limits.MAX_RETRY_AFTER_S
    assert said("nan") is None and said("-3") is None and said("soon") is None


def test_event_lines_split_on_every_line_end_and_are_capped() -> None:
    chunks = [b"a\r", b"\nb\rc", b"\n\n", b"d" * 5, b"e\r\n"]
    assert list(bounded_lines(chunks, 100, 60)) == ["a", "b", "c", "", "ddddde"]
    with pytest.raises(LimitExceeded, match="longer than 10 bytes"):
        list(bounded_lines([b"ok\n", b"x" * 6, b"y" * 6], 10, 60))
    slow = iter([b"par", b"tial"])

    def late() -> Iterator[bytes]:
        yield next(slow)
        time.sleep(0.05)
        yield next(slow)

    with pytest.raises(LimitExceeded, match=r"unfinished after 0\.01 s"):
        list(bounded_lines(late(), 100, 0.01))


@pytest.mark.parametrize(("mode", "said"), [
    ("endless-line", "an event-stream line longer than 16 MB; the stream is reset"),
    ("endless-data", "an event longer than 16 MB; the stream is reset"),
])
def test_an_endless_event_resets_the_stream_and_everything_is_read_again(
        mode: str, said: str) -> None:
    peak_before = _peak_rss_mb()
    with HostileServer({"/events": mode}) as server:
        source = RemoteSource(ServerClient(server.url, timeout=DEADLINE_S), poll_s=0.2,
                              backoff_s=0.05)
        errors: list[str] = []
        source.start(lambda delta: None, on_error=errors.append)
        try:
            _wait(lambda: source.resyncs >= 3 and server.hits.get("/events", 0) >= 2)
            _wait(lambda: not source.health.live and source.health.detail)
            assert source.health.detail == f"{server.url}/events: {said}"
            assert sorted(source.state.tasks) == ["t0", "t1", "t2"]
        finally:
            source.stop()
    assert _peak_rss_mb() - peak_before < 200  # MBs, not the gigabytes of an unbounded line


def _wait(check: object, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, "not within the hang guard"
        time.sleep(0.02)


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
