"""Issue #32 point 9: the task server's event stream, fuzzed. Its bytes become lines
(remote/bounded.py) and its lines events (remote/sse.py); property tests (Hypothesis)
hold the two to:

- the same events, problems and reset from any chunking of the bytes as from one
  chunk (random bytes, over-long lines, bad UTF-8, CR/LF/CRLF split anywhere);
- a bad event between two good ones (a line over the limit, data over the limit, a
  line of bad bytes): both good ones delivered, one problem, one line;
- nothing escapes but the one stream reset (LimitExceeded), and only past the frame
  limit.

Before, an over-long line reset the whole stream (the events after it on that
connection were never delivered) — unless it came in one chunk, when it went through
whole, over the limit; data over the limit reset it too. And end to end: a real
server's stream with a 2 MB event between two task updates delivers both updates on
the one connection and says one line.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from console.remote.bounded import LimitExceeded, bounded_lines
from console.remote.client import ServerClient
from console.remote.source import RemoteSource
from console.remote.sse import SseEvent, SseProblem, parse_events
from tests.bernstein_server import FakeBernstein

LINE, FRAME = 40, 400  # small limits, so the fuzz reaches them: a line/data, a frame
TOKEN = "tok-fuzz-sse-secret"

Outcome = tuple[list[SseEvent | SseProblem], str | None]


def outcome(chunks: Iterable[bytes]) -> Outcome:
    """What the stream gives: its items in order, and the reset that ended it, if any."""
    items: list[SseEvent | SseProblem] = []
    try:
        for item in parse_events(bounded_lines(chunks, FRAME, 1e9), LINE, FRAME):
            items.append(item)
    except LimitExceeded as exc:
        return items, str(exc)
    return items, None


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(points)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


PIECES = st.one_of(
    st.binary(max_size=30),
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"\r\r", b"data: ", b"data:", b"event: ",
                     b"id: ", b"id: \x00", b": c", b"retry: 5", b"\xff", b"\xe2\x82",
                     b"\xe2\x82\xac", b"\xed\xa0\x80", b"\x00", b'{"id": "T1"}']),
    st.integers(min_value=LINE - 2, max_value=FRAME + 20).map(lambda n: b"x" * n),
)
STREAMS = st.lists(PIECES, max_size=40).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(data=STREAMS, points=st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_chunking_gives_what_one_chunk_gives(data: bytes, points: list[int]) -> None:
    whole = outcome([data])
    assert outcome(cut(data, [p % (len(data) + 1) for p in points])) == whole
    assert outcome([bytes([b]) for b in data]) == whole  # one byte at a time
    items, reset = whole
    for item in items:
        if isinstance(item, SseProblem):
            assert "\n" not in item.reason and len(item.reason) < 200
    assert reset is None or "\n" not in reset


NAMES = st.text("abcdefghij_", min_size=1, max_size=8)
# up to 3 lines of 3 characters (of up to 4 UTF-8 bytes): under the data limit of 40
DATA_LINE = st.text(st.characters(blacklist_categories=("Cs",),
                                  blacklist_characters="\r\n"), max_size=3)
GOOD = st.tuples(NAMES, st.lists(DATA_LINE, min_size=1, max_size=3))
ENDS = st.sampled_from([b"\n", b"\r", b"\r\n"])
BAD = st.one_of(
    st.integers(LINE + 1, FRAME // 2).map(lambda n: [b"data: " + b"y" * n]),  # a long line
    st.integers(LINE + 1, FRAME // 2).map(lambda n: [b": " + b"z" * n]),  # a long comment
    # bad bytes (each counts as the 3 bytes of the U+FFFD it is read as)
    st.integers(LINE // 3 + 1, FRAME // 4).map(lambda n: [b"data: " + b"\xff" * n]),
    st.integers(4, 8).map(lambda n: [b"event: bad", *[b"data: 0123456789ab"] * n]),  # data
)


def frame(lines: list[bytes], end: bytes) -> bytes:
    return b"".join(line + end for line in lines) + end


def good_frame(good: tuple[str, list[str]], end: bytes) -> bytes:
    name, data = good
    return frame([f"event: {name}".encode(), *(f"data: {d}".encode() for d in data)], end)


@settings(max_examples=300, deadline=None)
@given(first=GOOD, bad=BAD, second=GOOD, ends=st.tuples(ENDS, ENDS, ENDS),
       points=st.lists(st.integers(min_value=0, max_value=1000), max_size=8))
def test_a_bad_event_between_two_good_ones_is_one_problem(
        first: tuple[str, list[str]], bad: list[bytes], second: tuple[str, list[str]],
        ends: tuple[bytes, bytes, bytes], points: list[int]) -> None:
    data = good_frame(first, ends[0]) + frame(bad, ends[1]) + good_frame(second, ends[2])
    items, reset = outcome(cut(data, [p % (len(data) + 1) for p in points]))
    assert reset is None
    events = [(e.event, e.data) for e in items if isinstance(e, SseEvent)]
    assert events == [(first[0], "\n".join(first[1])), (second[0], "\n".join(second[1]))]
    problems = [p.reason for p in items if isinstance(p, SseProblem)]
    assert len(problems) == 1 and "\n" not in problems[0], problems
    assert problems[0].startswith(("an event-stream line longer than 40 bytes",
                                   "an event's data longer than 40 bytes"))


def test_a_frame_past_its_limit_resets_the_stream_after_the_events_before_it() -> None:
    data = b"data: a\n\n" + b"data: 0123456789\n" * 100
    items, reset = outcome([data])
    assert [e.data for e in items if isinstance(e, SseEvent)] == ["a"]
    assert reset == "an event longer than 400 bytes"
    assert outcome([b"x" * (FRAME + 1) + b"\n"]) == ([], "an event-stream line longer "
                                                          "than 400 bytes")


def _wait(check: Callable[[], object], timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "not in time"
        time.sleep(0.02)


def test_a_servers_2_mb_event_between_two_updates_is_one_line_on_one_connection() -> None:
    server = FakeBernstein(TOKEN).start()
    one, two = server.add("First"), server.add("Second")
    source = RemoteSource(ServerClient(server.url, token=TOKEN, timeout=5), poll_s=30,
                          backoff_s=0.05)
    errors: list[str] = []
    source.start(lambda delta: None, on_error=errors.append)
    try:
        _wait(lambda: source.loaded.is_set() and source.health.live and server.subscribers())
        connects = server.stream_connects
        server.publish("task_update", {"id": one})
        huge = json.dumps({"id": "T-evil", "blob": "x" * (2 * 1024 * 1024)})
        with server.lock:
            for subscriber in server._subscribers:
                subscriber.put(f"event: task_update\ndata: {huge}\n\n")
        server.publish("task_update", {"id": two})
        _wait(lambda: {f"/tasks/{one}", f"/tasks/{two}"} <= set(server.paths("GET")))
        assert server.stream_connects == connects and source.health.live  # never reset
        assert "/tasks/T-evil" not in server.paths("GET")
        assert errors == [f"{server.url}/events: an event-stream line longer than 1 MB: "
                          "the event it is in is dropped"]
    finally:
        source.stop()
        server.stop()
