"""The benchmark data generator keeps producing what the console reads, problem-free."""

from __future__ import annotations

from pathlib import Path

from benchmarks.generate import Sizes, generate
from console.model import TaskState
from console.sdd.paths import JSONL_KINDS, Kind, SddPaths
from console.sdd.source import LocalSource


def test_generated_project_loads_without_problems(tmp_path: Path) -> None:
    counts = generate(tmp_path, Sizes.tiny(), seed=7)
    source = LocalSource(tmp_path)
    source.load()
    state = source.state
    assert state.problems == []
    assert len(state.tasks) == Sizes.tiny().tasks
    assert {t.status for t in state.tasks.values()} == {s.value for s in TaskState}
    for kind in JSONL_KINDS:  # every file kind is written and has lines
        assert counts[kind.value] > 0, kind
        assert SddPaths(tmp_path).of(kind).stat().st_size > 0, kind
    assert sum(state.gate_counts[g].total() for g in state.gate_counts) == Sizes.tiny().gate_lines
    assert len(state.chains) == Sizes.tiny().chains
    assert state.reflection_count == Sizes.tiny().reflections
    assert len(state.proposals) == Sizes.tiny().proposals
    assert state.pending_proposals()
    assert len(state.gate_reports) == Sizes.tiny().gate_reports
    assert len(state.tickets) == Sizes.tiny().tickets
    assert {t.form for t in state.tickets.values()} == {"yaml", "front-matter", "markdown"}
    assert state.files_of(Kind.GATE_REPORT)


def test_generator_is_deterministic(tmp_path: Path) -> None:
    generate(tmp_path / "a", Sizes.tiny(), seed=3)
    generate(tmp_path / "b", Sizes.tiny(), seed=3)
    generate(tmp_path / "c", Sizes.tiny(), seed=4)
    for kind in JSONL_KINDS:
        a, b = (SddPaths(tmp_path / x).of(kind).read_bytes() for x in "ab")
        assert a == b, kind
    tasks = Kind.TASKS.value
    assert ((tmp_path / "a" / ".sdd" / tasks).read_bytes()
            != (tmp_path / "c" / ".sdd" / tasks).read_bytes())


def test_a_project_as_bernstein_323_writes_it_loads_as_the_other(tmp_path: Path) -> None:
    """--shape 3.23: task records with 3.23.0's keys and none of ours, a gate's command
    in its line; the same gate figures, and the two keys kept in each task's extra."""
    generate(tmp_path / "old", Sizes.tiny(), seed=5)
    generate(tmp_path / "new", Sizes.tiny(), seed=5, shape="3.23")
    old, new = (LocalSource(tmp_path / name, checkpoint_after=None) for name in ("old", "new"))
    old.load()
    new.load()
    assert new.state.problems == []
    assert new.state.gate_stats == old.state.gate_stats
    assert b'"command": ' in SddPaths(tmp_path / "new").of(Kind.GATE_LINES).read_bytes()
    assert all(dict(t.extra) == {"parent_context": None, "max_turns": None}
               and t.created_at is None for t in new.state.tasks.values())
    assert {t.id: t.status for t in new.state.tasks.values()} == {
        t.id: t.status for t in old.state.tasks.values()}
