"""One gate registry (#18.5): config parsing and the pipeline read the same GateDefs."""

from __future__ import annotations

from pathlib import Path

from console.engine.gates import pipeline
from console.sdd import gate_config
from console.sdd.gate_registry import BUILT, BY_NAME, GATES, NOT_BUILT
from tests.test_gates import gates, make_project

SEED_000 = ("lint", "type_check", "tests", "security_scan", "complexity_check", "pii_scan",
            "dlp_scan", "merge_conflict", "coverage_delta", "dep_audit", "import_cycle",
            "intent_verification", "mutation_testing", "dead_code", "comment_quality",
            "auto_format", "large_file", "integration_test_gen", "review_rubric",
            "test_expansion", "agent_test_mutation", "benchmark")


def test_config_and_pipeline_agree_with_the_registry() -> None:
    assert set(pipeline.BUILTIN) == BUILT  # every built gate runs; nothing runs unregistered
    assert gate_config.SUPPORTED == BUILT and gate_config.NOT_YET == NOT_BUILT
    assert [s[1] for s in gate_config.DEFAULT_SPECS] == [g.name for g in GATES if g.built]
    assert set(pipeline.TOOLS) <= BUILT and set(pipeline.LIBRARIES) <= BUILT
    assert {g.name for g in GATES if not g.cached} == pipeline.NEVER_CACHED
    assert set(SEED_000) <= set(BY_NAME)  # all 22 of seed 000's table are known
    for flag, name, required, condition in gate_config.DEFAULT_SPECS:
        assert (BY_NAME[name].flag, BY_NAME[name].required, BY_NAME[name].condition) == \
            (flag, required, condition)
        assert condition in gate_config.CONDITIONS


def test_default_pipeline_follows_every_registry_flag() -> None:
    """Each built gate's flag turns it on; the parsed pipeline carries its registry entry."""
    raw: dict[str, object] = {g.flag: True for g in GATES if g.built}
    raw["benchmark"] = {"enabled": True}
    parsed = gate_config.parse_quality_gates(raw)
    assert [(s.name, s.required, s.condition) for s in parsed.pipeline] == \
        [(g.name, g.required, g.condition) for g in GATES if g.built]


def test_a_flag_for_a_gate_not_built_is_refused_not_ignored(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  migration_reversibility: true\n")
    result = gates(root)
    assert result.returncode == 2
    assert "quality_gates.migration_reversibility: gate 'migration_reversibility' is not " \
        "supported yet" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    (root / "bernstein.yaml").write_text("quality_gates:\n  migration_reversibility: false\n")
    assert gates(root).returncode == 0


def test_readme_gate_table_lists_every_registry_gate() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme[readme.index("| gate | flag, default required, condition |"):]
    rows = table[:table.index("\n\n")].splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [g.name for g in GATES]
    assert set(SEED_000) <= {row.split("`")[1] for row in rows}
