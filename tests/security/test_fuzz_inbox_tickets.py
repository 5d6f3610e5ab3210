"""#32 point 9: the control-inbox request reader and the ticket parser face data an
agent (or a repository) wrote. Random, garbled, oversized and wrongly signed files among
valid ones: each bad one gets exactly one refusal line naming it (and, for the inbox, a
refusal answer), nothing raises, and every valid one around it is still carried out /
read."""

from __future__ import annotations

import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.control import Outcome
from console.engine.events import EventLog
from console.engine.inbox import EngineInbox
from console.engine.inbox_key import MAX_REQUEST_BYTES, sign
from console.engine.ingest import Ingestor
from console.engine.store import TaskStore
from console.sdd.paths import Kind, SddPaths
from console.sdd.tickets import TicketError, parse_ticket

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)

REQUEST_FIELDS = st.fixed_dictionaries(
    {"action": st.sampled_from(["pause", "resume", "cancel", "retry", "bogus"])},
    optional={"task_id": st.text(max_size=12), "reason": st.text(max_size=40),
              "extra": JSONISH})


def _bad_request(draw: st.DrawFn, index: int) -> tuple[str, bytes]:
    """A file name and content that must never be carried out."""
    kind = draw(st.sampled_from(["bytes", "json", "object", "unsigned", "forged", "huge",
                                 "truncated"]))
    request_id = secrets.token_hex(8)
    fields = {**draw(REQUEST_FIELDS), "id": request_id, "requested_at": 1.0e12}
    name = f"bad{index}.json"
    if kind == "bytes":
        return name, draw(st.binary(max_size=300))
    if kind == "json":
        return name, json.dumps(draw(JSONISH)).encode()
    if kind == "object":
        return name, json.dumps(draw(st.dictionaries(st.text(max_size=8), JSONISH,
                                                     max_size=5))).encode()
    if kind == "unsigned":
        return f"{request_id}.json", json.dumps(fields).encode()
    if kind == "forged":
        return f"{request_id}.json", json.dumps(sign(secrets.token_bytes(32), fields)).encode()
    if kind == "huge":
        return name, json.dumps({**fields, "pad": "x" * MAX_REQUEST_BYTES}).encode()
    text = json.dumps(fields)
    return name, text[:draw(st.integers(0, max(0, len(text) - 1)))].encode()


@st.composite
def inbox_files(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
    """Valid requests (fields only: signed once the engine's key exists) and bad files."""
    valid = [draw(REQUEST_FIELDS) for _ in range(draw(st.integers(0, 6)))]
    bad = [_bad_request(draw, index) for index in range(draw(st.integers(0, 10)))]
    return valid, bad


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inbox_files())
def test_each_bad_request_is_refused_once_and_every_valid_one_carried_out(
        files: tuple[list[dict[str, Any]], list[tuple[str, bytes]]]) -> None:
    valid_fields, bad = files
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        paths = SddPaths(root)
        events = EventLog(paths)
        engine_inbox = EngineInbox(paths, events)
        assert engine_inbox.key is not None
        inbox = root / ".sdd" / "runtime" / "control" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        valid: dict[str, dict[str, Any]] = {}
        for fields in valid_fields:
            request_id = secrets.token_hex(16)
            signed = sign(engine_inbox.key, {**fields, "id": request_id,
                                             "requested_at": time.time(),
                                             "expires_at": time.time() + 60})
            valid[f"{request_id}.json"] = signed
            (inbox / f"{request_id}.json").write_text(json.dumps(signed))
        for name, content in bad:
            (inbox / name).write_bytes(content)
        carried_out: list[str] = []

        def handle(request: dict[str, object], _reply: Any) -> Outcome:
            carried_out.append(str(request["id"]))
            return Outcome.done(f"did {request['id']}")

        while engine_inbox.drain(handle):
            pass
        assert sorted(carried_out) == sorted(r["id"] for r in valid.values())
        outbox = root / ".sdd" / "runtime" / "control" / "outbox"
        log = paths.of(Kind.ENGINE_EVENTS)
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
            else []
        for name, _content in bad:
            said = [e for e in lines
                    if e.get("file") == f".sdd/runtime/control/inbox/{name}"]
            assert len(said) == 1 and "control request refused" in said[0]["message"], said
            assert "\n" not in said[0]["message"]
            answer = json.loads((outbox / name).read_text())
            assert answer["ok"] is False and answer["message"].startswith("request refused")
        for name in valid:
            answer = json.loads((outbox / name).read_text())
            assert answer["ok"] is True
        assert not [n for n in inbox.iterdir() if not n.name.startswith(".")]


YAML_CHARS = st.sampled_from(list(":-#*&!|>'\"{}[],?%@`\n \t\\") + list("abtitlerodyx01"))
FRAGMENTS = st.sampled_from([
    "title: ", "id: ", "depends_on: ", "priority: ", "deadline: ", "max_retries: ",
    "completion_signals: ", "sla_minutes: ", "files: ", "- ", "!!python/object:os.system ",
    "!!binary ", "!!timestamp ", "!!set ", "!!omap ", "&a ", "*a ", "<<: ", "? ", "[", "]",
    "{", "}", "2020-01-01", "1e400", "-.inf", ".nan", "9" * 40, "\ufeff", "\x85", "\u2028",
    "---", "...", "# ", "**Role:** ", "**Priority:** ", "%YAML 1.1", "%TAG ! tag:x,2000:",
    "\n", "  ", "\t", "'", '"', "|", ">", ":", ",", "@", "`", "~", "null", "yes"])
TEXTISH = st.lists(st.one_of(FRAGMENTS, st.text(YAML_CHARS, max_size=6)),
                   max_size=40).map("".join)


@st.composite
def ticket_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "yaml", "front", "markdown", "map", "dump"]))
    if kind == "bytes":
        return draw(st.binary(max_size=400))
    if kind == "yaml":
        return draw(TEXTISH).encode()
    if kind == "front":
        return f"---\n{draw(TEXTISH)}\n---\n{draw(TEXTISH)}".encode()
    if kind == "markdown":
        return f"# {draw(TEXTISH)}\n**Role:** {draw(TEXTISH)}\n{draw(TEXTISH)}".encode()
    if kind == "map":
        return f"title: {draw(TEXTISH)}\n{draw(TEXTISH)}".encode()
    fields = draw(st.dictionaries(st.sampled_from(
        ["title", "id", "role", "priority", "depends_on", "files", "completion_signals",
         "deadline", "sla_minutes", "max_retries", "model", "tags", "description"]),
        JSONISH, max_size=6))
    return yaml.safe_dump(fields).encode()


@settings(max_examples=400, deadline=None)
@given(ticket_bytes())
def test_the_ticket_parser_answers_a_ticket_or_one_line(data: bytes) -> None:
    result = parse_ticket(data, ".sdd/backlog/open/fuzz.yaml")
    if isinstance(result, TicketError):
        assert result.source == ".sdd/backlog/open/fuzz.yaml"
        assert result.reason and "\n" not in result.reason, result.reason


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ticket_bytes(), max_size=8), st.integers(1, 4), st.booleans())
def test_bad_tickets_are_said_once_and_the_good_ones_still_read(
        contents: list[bytes], good: int, link: bool) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "project"
        paths = SddPaths(root)
        directory = root / ".sdd" / "backlog" / "open"
        directory.mkdir(parents=True)
        expected_bad = set()
        for index, data in enumerate(contents):
            name = f"fuzz{index}.yaml"
            (directory / name).write_bytes(data)
            if isinstance(parse_ticket(data, name), TicketError):
                expected_bad.add(name)
        if link:  # a valid ticket, outside: a link to it is refused, unread
            (Path(scratch) / "outside.yaml").write_text("title: outside\n")
            (directory / "link.yaml").symlink_to(Path(scratch) / "outside.yaml")
            expected_bad.add("link.yaml")
        for index in range(good):
            (directory / f"good{index}.yaml").write_text(f"title: good {index}\nid: G{index}\n")
        events = EventLog(paths)
        ingestor = Ingestor(TaskStore(paths), paths, events)
        found = {c.path.name for c in ingestor.scan()}
        ingestor.scan()  # a second pass says nothing again
        assert {f"good{index}.yaml" for index in range(good)} <= found
        assert not expected_bad & found
        log = paths.of(Kind.ENGINE_EVENTS)
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
            else []
        for name in expected_bad:
            said = [e for e in lines if e.get("file") == f".sdd/backlog/open/{name}"]
            assert len(said) == 1 and "\n" not in said[0]["message"], said
