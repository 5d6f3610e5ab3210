"""Backlog tickets in all three forms, with Bernstein's defaults and normalisation."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from console.model import CompletionSignal, Ticket
from console.sdd.tickets import TicketError, normalise_priority, parse_ticket

SEED_YAML = """\
id: "TSK-042"
title: "Implement hybrid retrieval with BM25 fallback"
role: "backend"
priority: 1 # 1=critical, 2=normal, 3=nice-to-have
scope: "medium" # small / medium / large
complexity: "high" # low / medium / high
estimated_minutes: 30
depends_on: ["TSK-040"]
completion_signals:
- type: "path_exists"
  path: "src/retrieval/bm25.py"
- type: "test_passes"
  command: "pytest tests/test_bm25.py"
- type: "file_contains"
  path: "src/auth/jwt.py"
  contains: "def verify_token"
- type: "api_responds"
  url: "http://127.0.0.1:8000/health"
  status: 204
files:
- "src/retrieval/bm25.py"
- "tests/test_bm25.py"
"""

FRONT_MATTER = """\
---
id: T-42
title: Add rate limiting to the upload endpoint
role: backend
priority: p1
scope: small
complexity: medium
estimated_minutes: 40
janitor_signals:
  - type: path_exists
    value: src/app/ratelimit.py
  - type: file_contains
    value: "src/app/ratelimit.py :: def limit"
---

# Add rate limiting to the upload endpoint

Limit POST /upload to 10 requests per minute per API key.
"""

BOLD = """\
# Write the release notes

**Role:** docs
**Priority:** 3
**Scope:** tiny
**Complexity:** LOW

Summarise the changes since 1.2.
"""


def test_plain_yaml_map_as_seed_001_writes_it() -> None:
    ticket = parse_ticket(SEED_YAML, "open/tsk-042.yaml")
    assert isinstance(ticket, Ticket)
    assert (ticket.ticket_id, ticket.title, ticket.role, ticket.priority, ticket.scope,
            ticket.complexity, ticket.estimated_minutes, ticket.form) == (
        "TSK-042", "Implement hybrid retrieval with BM25 fallback", "backend", 1, "medium",
        "high", 30, "yaml")
    assert ticket.depends_on == ("TSK-040",)
    assert ticket.files == ("src/retrieval/bm25.py", "tests/test_bm25.py")
    assert ticket.completion_signals == (
        CompletionSignal("path_exists", "src/retrieval/bm25.py"),
        CompletionSignal("test_passes", "pytest tests/test_bm25.py"),
        CompletionSignal("file_contains", "src/auth/jwt.py :: def verify_token"),
        CompletionSignal("api_responds", "http://127.0.0.1:8000/health", 204),
    )


def test_front_matter_as_bernsteins_github_writer_writes_it() -> None:
    ticket = parse_ticket(FRONT_MATTER, "open/42-add-rate-limit.yaml")
    assert isinstance(ticket, Ticket)
    assert ticket.form == "front-matter"
    assert (ticket.ticket_id, ticket.priority, ticket.scope, ticket.estimated_minutes) == (
        "T-42", 1, "small", 40)
    assert ticket.description.startswith("# Add rate limiting")
    assert "10 requests per minute" in ticket.description
    assert ticket.completion_signals == (
        CompletionSignal("path_exists", "src/app/ratelimit.py"),
        CompletionSignal("file_contains", "src/app/ratelimit.py :: def limit"),
    )


def test_bold_field_markdown_with_fallbacks() -> None:
    ticket = parse_ticket(BOLD, "open/3-notes.md")
    assert isinstance(ticket, Ticket)
    assert (ticket.title, ticket.role, ticket.priority, ticket.scope, ticket.complexity,
            ticket.form) == ("Write the release notes", "docs", 3, "medium", "low", "markdown")
    assert ticket.description == BOLD.strip()


def test_bernsteins_defaults_and_unpinned_model() -> None:
    ticket = parse_ticket("title: Tiny\nmodel: auto\neffort: normal\n", "t.yaml")
    assert isinstance(ticket, Ticket)
    assert (ticket.role, ticket.priority, ticket.scope, ticket.complexity,
            ticket.estimated_minutes, ticket.model, ticket.effort, ticket.description) == (
        "backend", 2, "medium", "medium", 45, None, None, "Tiny")
    pinned = parse_ticket("title: Pinned\nmodel: opus\neffort: max\n", "t.yaml")
    assert isinstance(pinned, Ticket) and (pinned.model, pinned.effort) == ("opus", "max")


def test_priority_normalisation() -> None:
    assert [normalise_priority(v) for v in (0, 1, 2, 3, 4, "p0", "P2", "high", None, "12")] == [
        1, 1, 2, 3, 3, 1, 2, 2, 2, 3]


def test_deadline_forms() -> None:
    iso = parse_ticket("title: T\ndeadline: 2026-11-22T10:00:00Z\n", "t.yaml")
    epoch = parse_ticket("title: T\ndeadline: 1795000000\nsla_minutes: 5\n", "t.yaml")
    assert isinstance(iso, Ticket) and isinstance(epoch, Ticket)
    assert iso.deadline == dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC).timestamp()
    assert (epoch.deadline, epoch.sla_minutes) == (1795000000.0, 5.0)


def test_broken_tickets_say_why() -> None:
    cases = {
        "nothing here": "not a ticket",
        "---\ntitle: x\n": "front matter opened with '---' is never closed",
        "title: ''\n": "field 'title' is empty",
        "role: qa\n": "YAML map has no 'title'",
        "title: [a, b\n": "not valid YAML",
        "title: T\ncompletion_signals:\n  - type: teleport\n    value: x\n":
            "completion signal type 'teleport'",
        "title: T\ncompletion_signals:\n  - type: file_contains\n    value: no-separator\n":
            "is not 'path :: needle'",
        "title: T\nestimated_minutes: soon\n": "field 'estimated_minutes': expected an integer",
        "title: T\ndepends_on: {a: 1}\n": "field 'depends_on': expected a list",
        "---\n[1, 2]\n---\n# T\n": "front matter is not a YAML map",
    }
    for text, reason in cases.items():
        result = parse_ticket(text, "open/x.yaml")
        assert isinstance(result, TicketError), text
        assert reason in result.reason, (text, result.reason)
        assert result.source == "open/x.yaml"
    assert "invalid UTF-8" in str(parse_ticket(b"title: \xff\n", "b.yaml"))
    assert "NUL" in str(parse_ticket("title: a\x00b", "b.yaml"))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.binary(),
                 st.text(alphabet="-#*:\n []{}'\"|>&!%@`yamltie0123 ").map(lambda t: "---\n" + t),
                 st.text(alphabet="-#*:\n []{}'\"|>&!%@`roletipy0123 ")))
def test_parser_never_raises(data) -> None:
    result = parse_ticket(data, "fuzz.yaml")
    assert isinstance(result, Ticket | TicketError)


def test_review_findings_on_odd_tickets() -> None:
    import time

    odd = ["title: T\nrequire_review: !!bool maybe\n", "title: T\ndeadline: !!timestamp soon\n",
           "title: T\npriority: !!int\n"]
    for text in odd:
        assert isinstance(parse_ticket(text, "odd.yaml"), TicketError), text
    started = time.monotonic()
    result = parse_ticket("#" + " " * 5000 + "x" + " " * 5000 + "\n", "slow.md")
    assert time.monotonic() - started < 1.0
    assert isinstance(result, Ticket) and result.title == "x"
    csharp = parse_ticket("# Port the client to C#\n\nbody\n", "c.md")
    assert isinstance(csharp, Ticket) and csharp.title == "Port the client to C#"
    unclosed = parse_ticket("---\n# Title after a rule\n**Role:** qa\n", "u.md")
    assert isinstance(unclosed, Ticket) and (unclosed.title, unclosed.role) == (
        "Title after a rule", "qa")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n" \
           "title: T\npriority: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    started = time.monotonic()
    assert isinstance(parse_ticket(bomb, "bomb.yaml"), Ticket)
    assert time.monotonic() - started < 1.0
