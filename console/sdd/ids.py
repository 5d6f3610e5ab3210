"""Ids as an operator types them: the whole id, or any prefix that names one task or
proposal only (issue #19.8); failing that, a prefix of a part after a `-` that names one
only, as with a short git hash — `approve 3f2a` for `EVO-20261124-3f2a9b1c`."""

from __future__ import annotations

from collections.abc import Iterable

from console.sdd.sanitize import display_text

#: candidates named in an "ambiguous" error
SHOWN_CANDIDATES = 5


class AmbiguousId(ValueError):
    """A prefix that several ids start with: the one line names some of them."""


def resolve_id(given: str, known: Iterable[str], what: str) -> str:
    """The id `given` names: itself when it is an id (an exact match always wins), else
    the one id it is a prefix of (else of a part after a `-`); unchanged when nothing
    matches (the action then says the id is unknown, as for any other). AmbiguousId
    when several ids match."""
    ids = set(known)
    if given in ids or not given:
        return given
    matches = sorted(i for i in ids if i.startswith(given))
    if not matches:
        matches = sorted(i for i in ids if any(part.startswith(given)
                                               for part in i.split("-")[1:]))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        return given
    shown = ", ".join(display_text(m, limit=80) for m in matches[:SHOWN_CANDIDATES])
    more = f" and {len(matches) - SHOWN_CANDIDATES} more" if len(matches) > SHOWN_CANDIDATES \
        else ""
    raise AmbiguousId(f"{what} id {display_text(given, limit=80)!r} is ambiguous: "
                      f"{len(matches)} {what}s match it ({shown}{more}); give more of it")
