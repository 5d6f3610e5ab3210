"""Backlog ticket files (.sdd/backlog/open/*.yaml|*.yml|*.md) in all three forms.

1. a plain YAML map, as seed 001 writes it;
2. YAML front matter between `---` fences, the body being the description
   (Bernstein's GitHub-issue writer);
3. Markdown with a `# Title` heading and `**Role:** x` bold fields (Bernstein's
   roadmap and demo writers).

Bernstein's defaults and normalisation apply (reference §1.3): priority is the
first integer found, collapsed to 1..3; an invalid scope or complexity falls
back to medium; model `auto` and effort `normal` mean "not pinned".
`parse_ticket` never raises: it returns a Ticket or a TicketError with the reason.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import msgspec

from console.model import Ticket
from console.sdd.fields import (
    RecordError,
    bool_or,
    brief,
    int_or,
    opt_epoch,
    opt_float,
    opt_int,
    opt_str,
    str_tuple,
)
from console.sdd.task_codec import decode_signals

TICKET_SUFFIXES = (".yaml", ".yml", ".md")
MAX_TICKET_BYTES = 1024 * 1024
SCOPES = ("small", "medium", "large")
COMPLEXITIES = ("low", "medium", "high")

_BOLD_FIELD = re.compile(
    r"\*\*(role|priority|scope|complexity|model|effort|id):\*\*[ \t]*([^\n*]+)", re.IGNORECASE)


def heading(text: str) -> str | None:
    """Bernstein's title rule: the first line that starts with '# '."""
    for line in text.splitlines():
        if line.startswith("# "):
            title = line[2:].strip()
            if title:
                return title
    return None


class TicketError(msgspec.Struct, frozen=True):
    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


def normalise_priority(value: object) -> int:
    """Bernstein's rule: the first integer found; ≤1→1, 2→2, ≥3→3; none → 2."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 2
    match = re.search(r"\d+", str(value)[:64])
    if match is None:
        return 2
    number = int(match.group()[:6])
    return 1 if number <= 1 else 2 if number == 2 else 3


def _choice(value: str | None, allowed: tuple[str, ...]) -> str:
    value = (value or "").strip().lower()
    return value if value in allowed else "medium"


def _pin(value: str | None, unpinned: str) -> str | None:
    value = (value or "").strip()
    return None if not value or value.lower() == unpinned else value


def _yaml() -> ModuleType:
    """PyYAML, imported with the first ticket read: start-up does not pay for it."""
    import yaml

    return yaml


def _load_yaml(text: str) -> Any:
    """The YAML within the limits of console.sdd.safe_yaml (alias expansion, size)."""
    from console.sdd.safe_yaml import load_yaml

    return load_yaml(text)


def _limit_error() -> type[Exception]:
    from console.sdd.safe_yaml import YamlLimitError

    return YamlLimitError


def _from_fields(source: str, form: str, fields: dict[str, Any], title: str,
                 description: str) -> Ticket:
    signals = decode_signals(fields.get("completion_signals"), "completion_signals")
    signals += decode_signals(fields.get("janitor_signals"), "janitor_signals")
    return Ticket(
        source=source,
        form=form,
        title=title,
        description=description,
        ticket_id=opt_str(fields, "id") or "",
        role=(opt_str(fields, "role") or "backend").strip() or "backend",
        priority=normalise_priority(fields.get("priority", 2)),
        scope=_choice(opt_str(fields, "scope"), SCOPES),
        complexity=_choice(opt_str(fields, "complexity"), COMPLEXITIES),
        estimated_minutes=int_or(fields, "estimated_minutes", 45),
        task_type=opt_str(fields, "type") or "feature",
        model=_pin(opt_str(fields, "model"), "auto"),
        effort=_pin(opt_str(fields, "effort"), "normal"),
        depends_on=str_tuple(fields, "depends_on"),
        files=str_tuple(fields, "files") + str_tuple(fields, "affected_paths"),
        tags=str_tuple(fields, "tags"),
        completion_signals=signals,
        deadline=opt_epoch(fields, "deadline"),
        sla_minutes=opt_float(fields, "sla_minutes"),
        require_review=bool_or(fields, "require_review", False),
        require_human_approval=bool_or(fields, "require_human_approval", False),
        cli=opt_str(fields, "cli") or opt_str(fields, "agent"),
        max_retries=_retries(fields),
    )


def _retries(fields: dict[str, Any]) -> int | None:
    value = opt_int(fields, "max_retries")
    if value is not None and not 0 <= value <= 100:
        raise RecordError(f"max_retries {value} is not between 0 and 100")
    return value


def _front_matter(source: str, text: str) -> Ticket | TicketError | None:
    end = text.find("\n---", 3)
    if end < 0:
        if heading(text):  # no closing fence: Bernstein reads it as Markdown
            return None
        return TicketError(source, "front matter opened with '---' is never closed")
    try:
        fields = _load_yaml(text[3:end])
    except _limit_error() as exc:
        return TicketError(source, f"front matter refused: {exc}")
    except _yaml().YAMLError as exc:
        if heading(text):  # Bernstein falls back to the Markdown form
            return None
        return TicketError(source, f"front matter is not valid YAML: {_yaml_reason(exc)}")
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        return TicketError(source, "front matter is not a YAML map")
    body = text[end + 4:].split("\n", 1)[1] if "\n" in text[end + 4:] else ""
    title = (opt_str(fields, "title") or "").strip() or heading(body) or ""
    if not title:
        return TicketError(source, "no title: front matter has no 'title' and no '# ' heading")
    description = body.strip() or (opt_str(fields, "description") or "").strip() or title
    return _from_fields(source, "front-matter", fields, title, description)


def _markdown(source: str, text: str) -> Ticket | TicketError:
    title = heading(text)
    if title is None:
        return TicketError(
            source, "not a ticket: no YAML map with a title, no front matter, no '# ' heading")
    fields = {m.group(1).lower(): m.group(2).strip() for m in _BOLD_FIELD.finditer(text)}
    return _from_fields(source, "markdown", fields, title, text.strip())


def _yaml_reason(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{problem} (line {mark.line + 1})" if mark is not None else str(problem)


def _parse(source: str, text: str) -> Ticket | TicketError:
    stripped = text.lstrip("\ufeff")
    if stripped.startswith("---"):
        result = _front_matter(source, stripped)
        if result is not None:
            return result
        return _markdown(source, stripped)
    try:
        fields = _load_yaml(stripped)
    except _limit_error() as exc:
        return TicketError(source, f"YAML refused: {exc}")
    except _yaml().YAMLError as exc:
        fields = None
        yaml_reason: str | None = _yaml_reason(exc)
    else:
        yaml_reason = None
    if isinstance(fields, dict) and "title" in fields:
        title = (opt_str(fields, "title") or "").strip()
        if not title:
            return TicketError(source, "field 'title' is empty")
        description = (opt_str(fields, "description") or "").strip() or title
        return _from_fields(source, "yaml", fields, title, description)
    if heading(stripped):
        return _markdown(source, stripped)
    if isinstance(fields, dict):
        return TicketError(source, "YAML map has no 'title'")
    if yaml_reason and not source.endswith(".md"):
        return TicketError(source, f"not valid YAML: {yaml_reason}")
    return _markdown(source, stripped)


def parse_ticket(data: bytes | str, source: str) -> Ticket | TicketError:
    """A ticket file's content → Ticket, or TicketError naming the reason. Never raises."""
    if isinstance(data, bytes):
        if len(data) > MAX_TICKET_BYTES:
            return TicketError(source, f"ticket is {len(data)} bytes, over the "
                                       f"{MAX_TICKET_BYTES}-byte limit")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return TicketError(source, f"invalid UTF-8 at byte {exc.start + 1}")
    if "\x00" in data:
        return TicketError(source, "binary content (NUL byte)")
    try:
        return _parse(source, data)
    except RecordError as exc:
        return TicketError(source, str(exc))
    except _yaml().YAMLError as exc:
        return TicketError(source, f"not valid YAML: {_yaml_reason(exc)}")
    except Exception as exc:  # PyYAML raises KeyError & co. on odd explicit tags
        return TicketError(source, f"unreadable ticket: {type(exc).__name__}: "
                                   f"{brief(str(exc), 200)}")
