"""Read one JSONL kind's file into a fresh State through its tail, in reads of `step`
bytes, as blocks and frames (the large-project paths, as LocalSource reads) or line by
line: the two must agree."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from console.sdd.delta import Delta
from console.sdd.kinds import KINDS
from console.sdd.paths import Kind
from console.sdd.state import State
from console.sdd.tail import JsonlTail


def read_kind(path: Path, kind: Kind, *, blocks: bool, step: int) -> tuple[State, Delta]:
    state, delta, tail = State(), Delta(), JsonlTail(path, path.name)
    frame = KINDS[kind].frame if blocks else None
    while True:
        batch = tail.read(step, blocks=blocks)
        prepared = (frame.prepare(batch.blocks, batch.max_line_bytes)  # (as LocalSource)
                    if frame is not None and batch.blocks else None)
        delta.merge(state.apply_jsonl(kind, path.name, batch, prepared))
        if not batch.more:
            return state, delta.merge(state.gate_frames_read())


def read_both(folder: Path, name: str, lines: list[bytes], kind: Kind,
              step: int = 1 << 20) -> tuple[tuple[State, Delta], tuple[State, Delta]]:
    """`lines` written to `folder/name`, read as blocks and line by line."""
    path = folder / name
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    return (read_kind(path, kind, blocks=True, step=step),
            read_kind(path, kind, blocks=False, step=step))


def odd_lines(good: st.SearchStrategy[dict[str, Any]], odd_values: Mapping[str, list[Any]],
              junk: st.SearchStrategy[bytes], *, odd_one_in: int,
              drop_one_in: int = 0) -> st.SearchStrategy[bytes]:
    """JSON lines, mostly `good` ones (as the writers write them, so most blocks go in
    whole), now and then one with an odd value, a key dropped (`drop_one_in`: 0,
    never), or `junk` that is not a record at all."""
    @st.composite
    def line(draw: st.DrawFn) -> bytes:
        if draw(st.integers(0, 30)) == 0:
            return draw(junk)
        record: dict[str, Any] = draw(good)
        if draw(st.integers(0, odd_one_in - 1)) == 0:
            key = draw(st.sampled_from(sorted(odd_values)))
            record[key] = draw(st.sampled_from(odd_values[key]))
        if drop_one_in and draw(st.integers(0, drop_one_in - 1)) == 0:
            record.pop(draw(st.sampled_from(sorted(record))))
        return json.dumps(record, ensure_ascii=draw(st.booleans())).encode()

    return line()
