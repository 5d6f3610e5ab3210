"""No import cycle between modules of `console/` (#18), on the graph of
`tests/import_graph.py` (the AST of every module, deferred imports included)."""

from __future__ import annotations

from tests.import_graph import cycles, graph


def test_the_graph_is_read_from_the_real_modules() -> None:
    edges = graph()
    assert len(edges) > 50
    assert "console.sdd.state" in edges["console.sdd.source"]


def test_the_detector_finds_a_planted_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_console_modules() -> None:
    assert cycles(graph()) == []
