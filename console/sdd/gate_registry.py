"""The one gate registry (seed 000's gate table): every gate Bernstein names, with its
config flag, default required flag and condition, what runs it, and whether its verdict
may be cached. Config parsing (`sdd/gate_config`) and the pipeline (`engine/gates/
pipeline`) both read this; a test checks that the pipeline runs exactly the built ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class GateDef:
    name: str
    flag: str  # quality_gates.<flag> that puts it in the default pipeline
    required: bool
    condition: str
    runs: str  # what runs it, in words (README, `gates --list`)
    default_on: bool = False
    tool: tuple[str, str | None] | None = None  # (executable, module): its version keys the cache
    library: str | None = None  # a Python library whose version keys the cache
    cached: bool = True  # False: it reads state or has side effects
    built: bool = True  # False: Bernstein names it, we refuse it as "not supported yet"


#: in the order the default pipeline runs them (auto_format first: it may change files)
GATES: tuple[GateDef, ...] = (
    GateDef("auto_format", "auto_format", False, "any_changed", "ruff format",
            tool=("ruff", "ruff"), cached=False),
    GateDef("lint", "lint", True, "always", "ruff check, or lint_command", default_on=True,
            tool=("ruff", "ruff")),
    GateDef("type_check", "type_check", True, "python_changed",
            "mypy or pyright, or type_check_command", tool=("mypy", "mypy")),
    GateDef("tests", "tests", True, "python_changed",
            "pytest on the tests that import what changed, or test_command",
            tool=("pytest", "pytest")),
    GateDef("security_scan", "security_scan", True, "python_changed", "bandit",
            tool=("bandit", "bandit")),
    GateDef("complexity_check", "complexity_check", True, "python_changed",
            "radon cc against base_ref", tool=("radon", "radon")),
    GateDef("pii_scan", "pii_scan", True, "any_changed", "phonenumbers, python-stdnum, regex",
            default_on=True, library="phonenumbers"),
    GateDef("dlp_scan", "dlp_scan", True, "any_changed", "detect-secrets", default_on=True,
            library="detect-secrets"),
    GateDef("merge_conflict", "merge_conflict_check", True, "any_changed",
            "git merge-tree against base_ref"),
    GateDef("coverage_delta", "coverage_delta", True, "python_changed",
            "coverage.py against a stored baseline", tool=("coverage", "coverage")),
    GateDef("dep_audit", "dep_audit", True, "deps_changed", "pip-audit, or dep_audit_command",
            cached=False),
    GateDef("import_cycle", "import_cycle_check", True, "python_changed",
            "the AST import graph (built in)"),
    GateDef("intent_verification", "intent_verification", True, "any_changed",
            "the LLM client (\"not configured\" without an endpoint)"),
    GateDef("mutation_testing", "mutation_testing", True, "python_changed", "mutmut",
            tool=("mutmut", "mutmut")),
    GateDef("dead_code", "dead_code_check", False, "python_changed", "vulture",
            tool=("vulture", "vulture")),
    GateDef("large_file", "large_file_check", False, "any_changed", "file sizes (built in)"),
    GateDef("benchmark", "benchmark", True, "always", "benchmark.command against a baseline",
            cached=False),
    GateDef("cross_model", "cross_model", True, "any_changed",
            "reviewer models of another family than the writer, after the other gates pass "
            "(the LLM client; \"not configured\" without an endpoint)"),
    GateDef("comment_quality", "comment_quality_check", False, "python_changed",
            "the AST: public functions and classes the change adds without a docstring"),
    GateDef("integration_test_gen", "integration_test_gen", True, "python_changed",
            "an integration test the LLM client writes for the change, run with the "
            "project's pytest", tool=("pytest", "pytest")),
    GateDef("review_rubric", "review_rubric", True, "python_changed",
            "seed 003's rubric (four weighted dimensions, 1-5) by the LLM client; "
            "\"not configured\" without an endpoint"),
    GateDef("test_expansion", "test_expansion", False, "python_changed",
            "extra unit tests the LLM client writes for the change, run with the project's "
            "pytest", tool=("pytest", "pytest")),
    GateDef("agent_test_mutation", "agent_test_mutation", True, "tests_changed",
            "pytest: the changed tests against mutants of the modules they import",
            tool=("pytest", "pytest")),
    GateDef("migration_reversibility", "migration_reversibility", True, "any_changed",
            "not built (named by Bernstein's VALID_GATE_NAMES, not by seed 000's table)",
            built=False),
)

BY_NAME: MappingProxyType[str, GateDef] = MappingProxyType({g.name: g for g in GATES})
BUILT = frozenset(g.name for g in GATES if g.built)
NOT_BUILT = frozenset(g.name for g in GATES if not g.built)
