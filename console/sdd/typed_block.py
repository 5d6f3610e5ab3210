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

from collections.abc import Callable, Iterable
from itertools import chain
from operator import attrgetter
from typing import Any

import msgspec

from console.records import Attempt, Chain
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

    def decode(self, data: bytes, first_line: int) -> list[Any] | None:
        """The records of a block of whole lines, or None (decode it line by line)."""
        if first_line == 1 and data.startswith(BOM):
            return None
        try:
            values = self.decoder().decode_lines(data)
        except (msgspec.MsgspecError, ValueError, RecursionError):
            return None
        if not whole_lines(data, values):
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
