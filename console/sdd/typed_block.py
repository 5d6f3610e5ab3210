"""A block of JSONL lines decoded by msgspec straight into record types (no dict, no
per-field decoder), for the kinds a large project has many lines of.

Taken only when every line is in the strict shape the wire type declares (the shape
Bernstein and the engine write) and the kind's `finish` takes them all; then each record
is exactly what the kind's per-field decoder would make of that line. Anything else — a
missing key, a key of no one's, a number as a string, an ISO timestamp where epoch
seconds go, a blank id, a blank line, a byte-order mark — returns None, and the State
decodes the block line by line with the usual reasons (tests/test_typed_block.py holds
the two paths to the same records and problems).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import chain
from operator import attrgetter
from typing import Any, Literal

import msgspec

from console.records import Attempt, Chain, Reflection
from console.sdd.tail import BOM, whole_lines
from console.sdd.task_codec import TaskWire, tasks_from_wire

#: a block's decoded values → its records, or None when one of them is not in the
#: shape the kind's per-field decoder takes as is (then: line by line)
Finish = Callable[[list[Any]], list[Any] | None]


def all_filled(values: Iterable[str]) -> bool:
    """fields.req_str takes each as it is: a string msgspec decoded is clean already, so
    what is left to check is that it is not blank."""
    return all(map(str.strip, values))


class TypedBlock(msgspec.Struct, frozen=True):
    """How one kind's blocks decode: straight into `wire` (its record type, or a strict
    mirror of the line), then `finish` (checks, and the records made from the wire)."""

    wire: type
    finish: Finish

    def decoder(self) -> msgspec.json.Decoder[Any]:
        return _decoder(self.wire)

    def decode(self, data: bytes, first_line: int, lines: int | None = None
               ) -> list[Any] | None:
        """The records of a block of whole lines (`lines` of them, when the caller
        counted: a tail's Block has), or None (decode it line by line)."""
        if first_line == 1 and data.startswith(BOM):
            return None
        try:
            values = self.decoder().decode_lines(data)
        except (msgspec.MsgspecError, ValueError, RecursionError):
            return None
        if not whole_lines(data, values, lines):
            return None
        return self.finish(values)


_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {}


def _decoder(record: type) -> msgspec.json.Decoder[Any]:
    decoder = _DECODERS.get(record)
    if decoder is None:
        decoder = _DECODERS[record] = msgspec.json.Decoder(record)
    return decoder


def _chains(chains: list[Chain]) -> list[Chain] | None:
    """decode_chain's required strings as written: ids and every attempt's model."""
    attempts: Iterable[Attempt] = chain.from_iterable(map(attrgetter("attempts"), chains))
    if (all_filled(map(attrgetter("chain_id"), chains))
            and all_filled(map(attrgetter("task_id"), chains))
            and all_filled(map(attrgetter("model"), attempts))):
        return chains
    return None


#: metrics/cascade_chains.jsonl: 50,000 lines in the benchmark's large project
CHAINS = TypedBlock(Chain, _chains)
#: runtime/tasks.jsonl: every change of every task (31,000 lines of 1 KB in the
#: benchmark's large project)
TASKS = TypedBlock(TaskWire, tasks_from_wire)


class _Diagnosis(msgspec.Struct, forbid_unknown_fields=True):
    what_failed: str | None = None
    why: str | None = None
    try_next: str | None = None
    focus: str | None = None


_NO_DIAGNOSIS = _Diagnosis()


class ReflectionWire(msgspec.Struct):
    """A reflections.jsonl line in the strict shape decode_reflection takes as it is
    (other keys are ignored by both)."""

    task_id: str
    iteration: int | None = None
    gate: str | None = None
    error_pattern: str | None = None
    diagnosis: _Diagnosis | None = None
    source: Literal["llm", "rules"] | None = None
    model: str | None = None
    digest: str | None = None
    files_changed: list[str] | None = None
    reused: bool | None = None
    timestamp: float | None = None


def _reflection(w: ReflectionWire) -> Reflection:
    d = w.diagnosis or _NO_DIAGNOSIS
    return Reflection(
        task_id=w.task_id, iteration=w.iteration or 0, gate=w.gate or "",
        error_pattern=w.error_pattern or "", what_failed=d.what_failed or "",
        why=d.why or "", try_next=d.try_next or "", focus=d.focus or "",
        source=w.source or "rules", model=w.model, digest=w.digest or "",
        files_changed=tuple(w.files_changed) if w.files_changed else (),
        reused=bool(w.reused), timestamp=w.timestamp)


def _reflections(lines: list[ReflectionWire]) -> list[Reflection] | None:
    """decode_reflection's checks: a task id that is not blank, a finite timestamp."""
    stamps = [w.timestamp for w in lines if w.timestamp is not None]
    if not all_filled(map(attrgetter("task_id"), lines)) or not all(map(math.isfinite,
                                                                         stamps)):
        return None
    return list(map(_reflection, lines))


#: metrics/reflections.jsonl: 20,000 lines in the benchmark's large project
REFLECTIONS = TypedBlock(ReflectionWire, _reflections)
