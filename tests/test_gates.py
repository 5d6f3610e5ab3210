"""The gate pipeline end to end on real repos with the real tools (ruff, mypy, pytest, …)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, trusted
from tests.engine_kit import assert_idle_exit, git

CALC_OK = "def add(a: int, b: int) -> int:\n    return a + b\n"
CALC_BAD = "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def make_project(base: Path, config: str = "") -> Path:
    root = base / "proj"
    (root / "src" / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "calc" / "__init__.py").write_text(CALC_OK)
    (root / "tests" / "test_calc.py").write_text(TEST_CALC)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    (root / "bernstein.yaml").write_text(textwrap.dedent(config) or
                                         "quality_gates:\n  type_check: true\n  tests: true\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init")
    return root


def gates(root: Path, *args: str, env: dict[str, str] | None = None):
    """`gates` on the tests' own project, trusted as it is now: these tests change its
    configuration between runs (tests/security/test_trust_* check the refusal)."""
    trusted(root)
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "gates", *args],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, **(env or {})})
    return result


def by_name(report: dict) -> dict[str, dict]:
    return {r["name"]: r for r in report["results"]}


def test_unused_import_and_failing_test_block_then_pass_then_cache(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    (root / "src" / "calc" / "__init__.py").write_text(CALC_BAD)
    first = gates(root, "--json")
    assert first.returncode == 1, first.stderr
    report = json.loads(first.stdout)
    results = by_name(report)
    assert report["overall_pass"] is False
    assert report["changed_files"] == ["src/calc/__init__.py"]
    assert results["lint"]["status"] == "fail" and results["lint"]["blocked"]
    assert "src/calc/__init__.py:1: F401" in results["lint"]["digest"]
    assert "import os" in results["lint"]["digest"]
    assert results["tests"]["status"] == "fail"
    assert "tests/test_calc.py::test_add" in results["tests"]["digest"]
    assert "tests/test_calc.py:5" in results["tests"]["digest"]
    assert results["tests"]["metadata"]["scope"] == "changed"
    assert results["tests"]["metadata"]["selected"] == ["tests/test_calc.py"]
    assert results["tests"]["metadata"]["failed_tests"] == ["tests/test_calc.py::test_add"]
    assert results["type_check"]["status"] == "pass"

    (root / "src" / "calc" / "__init__.py").write_text(CALC_OK + "\n\ndef sub(a: int, b: int) "
                                                       "-> int:\n    return a - b\n")
    second = gates(root, "--json")
    assert second.returncode == 0, second.stdout
    assert all(not r["cached"] for r in json.loads(second.stdout)["results"])
    third = gates(root, "--json")
    assert third.returncode == 0
    cached = json.loads(third.stdout)
    assert [r["cached"] for r in cached["results"]] == [True] * len(cached["results"])
    assert cached["cache_hits"] == len(cached["results"])

    table = gates(root)
    assert table.returncode == 0 and "PASS: no required gate blocks" in table.stdout


def test_engine_records_written_for_the_console(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  lint: true\n")
    subprocess.run([sys.executable, "-m", "console", "-C", str(root), "init"], check=True,
                   capture_output=True)
    (root / "src" / "calc" / "__init__.py").write_text(CALC_BAD)
    assert gates(root).returncode == 1
    lines = [json.loads(x) for x in
             (root / ".sdd/metrics/quality_gates.jsonl").read_text().splitlines()]
    lint = next(line for line in lines if line["gate"] == "lint")
    assert (lint["task_id"], lint["status"], lint["result"], lint["required"], lint["cached"]) \
        == ("working-tree", "fail", "blocked", True, False)
    assert lint["timestamp"].endswith("+00:00")
    log = (root / ".sdd/runtime/gate-logs/working-tree/lint.log").read_text()
    assert "ruff" in log and "F401" in log and "[exit 1" in log  # the raw output, kept
    report = json.loads((root / ".sdd/runtime/gates/working-tree.json").read_text())
    assert report["overall_pass"] is False and report["gates_run"] == ["lint", "pii_scan",
                                                                      "dlp_scan"]
    status = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "status",
                             "--json"], capture_output=True, text=True)
    summary = json.loads(status.stdout)
    assert summary["gates"]["by_gate"]["lint"] == {"fail": 1}
    assert summary["gates"]["reports"] == 1 and summary["problems"] == []


PLUGIN = '''
from pathlib import Path


class NoFooGate:
    name = "no_foo"
    required = True
    condition = "any_changed"

    def run(self, changed_files, run_dir, task_title, task_description):
        bad = [f for f in changed_files if "foo" in (Path(run_dir) / f).read_text()]
        return {"status": "fail" if bad else "pass",
                "details": f"found foo in {bad}" if bad else "clean"}
'''


def test_plugins_run_and_collisions_are_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path, """
        quality_gates:
          pipeline:
            - {name: no_foo, required: true, condition: any_changed}
            - {name: boom, required: false}
        """)
    plugins = root / ".bernstein" / "gates"
    plugins.mkdir(parents=True)
    (plugins / "no_foo.py").write_text(PLUGIN)
    (plugins / "boom.py").write_text(
        "class Boom:\n    name = 'boom'\n    def run(self, *args):\n"
        "        raise RuntimeError('kaboom')\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "gates")
    (root / "notes.txt").write_text("foo bar\n")
    result = gates(root, "--json")
    assert result.returncode == 1, result.stderr
    results = by_name(json.loads(result.stdout))
    assert results["no_foo"]["status"] == "fail"
    assert results["no_foo"]["details"] == "found foo in ['notes.txt']"
    assert results["boom"]["status"] == "fail" and not results["boom"]["blocked"]
    assert results["boom"]["details"] == "plugin boom raised RuntimeError: kaboom"

    (plugins / "also_foo.py").write_text(PLUGIN.replace("NoFooGate", "OtherFoo"))
    clash = gates(root)
    assert clash.returncode == 2
    assert "no_foo.py:NoFooGate" in clash.stderr and "also_foo.py:OtherFoo" in clash.stderr
    assert "both named 'no_foo'" in clash.stderr and "Traceback" not in clash.stderr
    (plugins / "also_foo.py").write_text(PLUGIN.replace('name = "no_foo"', 'name = "lint"'))
    builtin = gates(root)
    assert builtin.returncode == 2 and "'lint', which is a built-in gate" in builtin.stderr


def _seed_example() -> str:
    """Seed 000's plugin example, as the seed prints it (between its first `from` line
    and "Register via")."""
    seed = next((REPO.parent / "shared" / "seeds").glob("000*"), None)
    if seed is not None:
        text = seed.read_text()
        start = text.index("from pathlib import Path\nfrom bernstein.core.quality")
        return text[start:text.index("Register via", start)]
    return SEED_EXAMPLE


#: the same, for a checkout without ../shared (CI clones only the project)
SEED_EXAMPLE = '''from pathlib import Path
from bernstein.core.quality.gate_plugins import GatePlugin
from bernstein.core.quality.gate_runner import GateResult

class NoFooGate(GatePlugin):
    @property
    def name(self) -> str:
        return "no_foo"

    @property
    def required(self) -> bool:
        return True

    @property
    def condition(self) -> str:
        return "any_changed"

    def run(
        self,
        changed_files: list[str],
        run_dir: Path,
        task_title: str,
        task_description: str,
    ) -> GateResult:
        offending = [f for f in changed_files if "foo" in Path(f).read_text()]
        passed = not offending
        return GateResult(
            name=self.name,
            status="pass" if passed else "fail",
            required=self.required,
            blocked=not passed,
            cached=False,
            duration_ms=0,
            details=f"Found 'foo' in {offending}" if offending else "Clean",
        )
'''


def test_the_seeds_plugin_example_loads_unchanged(tmp_path: Path) -> None:
    """Seed 000's NoFooGate imports Bernstein's GatePlugin and GateResult: with no
    Bernstein installed it loads and runs as written (run from the project, as Bernstein
    runs it: the example reads Path(f) from there)."""
    example = _seed_example()
    assert example.strip() == SEED_EXAMPLE.strip()  # the copy is the seed's
    root = make_project(tmp_path, """
        quality_gates:
          pipeline:
            - {name: no_foo, required: true, condition: any_changed}
        """)
    (root / ".bernstein" / "gates").mkdir(parents=True)
    (root / ".bernstein" / "gates" / "no_foo.py").write_text(example)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "gate")
    (root / "notes.txt").write_text("foo bar\n")
    trusted(root)
    result = subprocess.run([sys.executable, "-m", "console", "gates", "--json"],
                            capture_output=True, text=True, timeout=300, cwd=root)
    assert result.returncode == 1, result.stderr
    gate = by_name(json.loads(result.stdout))["no_foo"]
    assert gate["status"] == "fail" and gate["blocked"], gate
    assert gate["details"] == "Found 'foo' in ['notes.txt']"
    (root / "notes.txt").write_text("bar\n")
    clean = subprocess.run([sys.executable, "-m", "console", "gates", "--json"],
                           capture_output=True, text=True, timeout=300, cwd=root)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert by_name(json.loads(clean.stdout))["no_foo"]["details"] == "Clean"


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    cases = {
        "quality_gates:\n  lint: yes-please\n": "quality_gates.lint must be true or false",
        "quality_gates:\n  lintt: true\n": "quality_gates.lintt is not a known key",
        "quality_gates:\n  pipeline:\n    - {name: migration_reversibility}\n":
            "gate 'migration_reversibility' is not supported yet",
        "quality_gates:\n  pipeline:\n    - {name: lint, condition: sometimes}\n":
            "condition 'sometimes' is not one of",
        "quality_gates:\n  timeout_s: soon\n": "quality_gates.timeout_s must be a number",
    }
    root = make_project(tmp_path)
    for text, message in cases.items():
        (root / "bernstein.yaml").write_text(text)
        result = gates(root)
        assert result.returncode == 2, text
        assert message in result.stderr, (text, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1


def test_timeouts_missing_tools_conditions_and_bypass(tmp_path: Path) -> None:
    root = make_project(tmp_path, """
        quality_gates:
          timeout_s: 1
          allow_bypass: true
          pipeline:
            - {name: tests, required: true, condition: python_changed,
               command_override: "sleep 30"}
            - {name: type_check, required: true, condition: always,
               command_override: "no-such-type-checker --strict"}
            - {name: lint, required: true, condition: tests_changed}
            - {name: large_file, required: false, condition: any_changed}
            - {name: dead_code, required: false, condition: python_changed}
        """)
    (root / "src" / "calc" / "__init__.py").write_text(CALC_OK + "\n# touched\n")
    result = gates(root, "--json", env={"BERNSTEIN_SKIP_GATES": "dead_code",
                                        "BERNSTEIN_SKIP_GATE_REASON": "hotfix"})
    results = by_name(json.loads(result.stdout))
    assert result.returncode == 1
    assert results["tests"]["status"] == "timeout" and results["tests"]["blocked"]
    assert results["type_check"]["status"] == "skipped"
    assert results["type_check"]["details"].startswith("REQUIRED GATE SKIPPED")
    assert "no-such-type-checker is not installed" in results["type_check"]["details"]
    assert results["lint"]["status"] == "skipped"
    assert results["lint"]["details"].endswith("condition tests_changed not met")
    assert results["large_file"]["status"] == "pass"
    assert results["dead_code"]["status"] == "bypassed"
    assert results["dead_code"]["metadata"]["reason"] == "hotfix"
    assert results["tests"]["duration_ms"] < 10_000  # the sleep was killed, not waited for


@pytest.fixture
def gate_context(tmp_path: Path):
    from console.engine.gates.base import GateContext
    from console.engine.llm import LlmClient
    from console.sdd.gate_config import GateSpec, parse_quality_gates
    from console.sdd.project_config import LlmConfig

    def make(root: Path, name: str, changed: tuple[str, ...], **options):
        config = parse_quality_gates(options)
        return GateContext(root, changed, (), "main", config, GateSpec(name), "t1", "title",
                           "description", LlmClient(LlmConfig()), tmp_path / "state")
    return make


def test_secret_and_personal_data_scans(tmp_path: Path, gate_context) -> None:
    from console.engine.gates.scan_gates import dlp_scan, pii_scan

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text(
        'AWS = "AKIAIOSFODNN7REALKEYX"\n'
        'SAMPLE = "AKIAIOSFODNN7EXAMPLE"\n'
        'password = "hunter2hunter2"  # pragma: allowlist secret\n')
    (tmp_path / "src" / "people.py").write_text(
        'CONTACT = "jane.doe@acme-corp.com"\n'
        'DOCS = "someone@example.com"\n'
        'PHONE = "+1 650-253-0000"\n'
        'CARD = "4539 1488 0343 6467"\n'
        'FAKE_CARD = "4111 1111 1111 1111"\n')
    changed = ("src/config.py", "src/people.py")
    dlp = dlp_scan(gate_context(tmp_path, "dlp_scan", changed))
    assert dlp.status == "fail"
    assert "src/config.py:1: AWS Access Key" in dlp.digest
    assert "AKIAIOSFODNN7REALKEYX" not in dlp.digest  # masked, never echoed
    assert "config.py:2" not in dlp.digest and "config.py:3" not in dlp.digest
    pii = pii_scan(gate_context(tmp_path, "pii_scan", changed))
    assert pii.status == "fail"
    lines = {line.split(": ")[0] for line in pii.digest.splitlines()[1:]}
    assert lines == {"src/people.py:1", "src/people.py:3", "src/people.py:4"}
    assert "jane.doe" not in pii.digest
    outside = pii_scan(gate_context(tmp_path, "pii_scan", changed, pii_scan_paths=["lib/"]))
    assert outside.status == "pass"


def test_repo_and_static_gates_on_real_tools(tmp_path: Path, gate_context) -> None:
    from console.engine.gates.python_gates import complexity_check, dead_code, security_scan
    from console.engine.gates.repo_gates import benchmark, dep_audit, intent_verification
    from console.engine.gates.scan_gates import import_cycle

    root = make_project(tmp_path)
    pkg = root / "src" / "calc"
    (pkg / "a.py").write_text("from calc import b\n\nX = 1\n")
    (pkg / "b.py").write_text("from calc import a\n\nY = 2\n")
    (pkg / "risky.py").write_text("import subprocess\n\n\ndef run(cmd):\n"
                                  "    return subprocess.call(cmd, shell=True)\n\n\n"
                                  "def unused_helper():\n    return 1\n")
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(25))
    (pkg / "tangled.py").write_text(f"def tangled(x):\n{branches}\n    return -1\n")
    changed = ("src/calc/a.py", "src/calc/b.py", "src/calc/risky.py", "src/calc/tangled.py")
    cycle = import_cycle(gate_context(root, "import_cycle", changed))
    assert cycle.status == "fail" and "calc.a → calc.b → calc.a" in cycle.digest
    security = security_scan(gate_context(root, "security_scan", changed))
    assert security.status == "fail" and "src/calc/risky.py:5: B602" in security.digest
    dead = dead_code(gate_context(root, "dead_code", changed, dead_code_min_confidence=60))
    assert dead.status == "fail" and "unused_helper" in dead.digest
    complex_ = complexity_check(gate_context(root, "complexity_check", changed))
    assert complex_.status == "fail" and "tangled has cyclomatic complexity 26" in complex_.digest
    from console.engine.gates.base import ToolMissing

    with pytest.raises(ToolMissing, match="pip-audit is not installed"):  # the pipeline: skipped
        dep_audit(gate_context(root, "dep_audit", ("requirements.txt",)))
    intent = intent_verification(gate_context(root, "intent_verification", changed))
    assert intent.status == "skipped" and "no LLM endpoint configured" in intent.details
    settings = {"enabled": True, "command": "cat score.txt", "threshold": 0.1}
    (root / "score.txt").write_text("ops/s 100\n")
    assert benchmark(gate_context(root, "benchmark", (), benchmark=settings)).details \
        .startswith("score 100 (first measurement")
    (root / "score.txt").write_text("ops/s 95\n")
    assert benchmark(gate_context(root, "benchmark", (), benchmark=settings)).status == "pass"
    (root / "score.txt").write_text("ops/s 80\n")
    verdict = benchmark(gate_context(root, "benchmark", (), benchmark=settings))
    assert verdict.status == "fail" and "below 90" in verdict.details


def test_merge_conflict_and_coverage_delta(tmp_path: Path, gate_context) -> None:
    from console.engine.gates.repo_gates import coverage_delta, merge_conflict

    root = make_project(tmp_path)
    git(root, "checkout", "-q", "-b", "feature")
    (root / "src" / "calc" / "__init__.py").write_text(CALC_OK + "\n\ndef mul(a, b):\n"
                                                       "    return a * b\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "mul")
    git(root, "checkout", "-q", "main")
    (root / "src" / "calc" / "__init__.py").write_text(CALC_OK + "\n\ndef mul(a, b):\n"
                                                       "    return b * a * 1\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "mul2")
    git(root, "checkout", "-q", "feature")
    conflict = merge_conflict(gate_context(root, "merge_conflict", ("src/calc/__init__.py",)))
    assert conflict.status == "fail" and "src/calc/__init__.py" in conflict.details
    fresh = make_project(tmp_path / "second")
    (fresh / "src" / "calc" / "__init__.py").write_text(
        CALC_OK + "\n\ndef mul(a, b):\n    if a:\n        return a * b\n    return 0\n")
    coverage = coverage_delta(gate_context(fresh, "coverage_delta", ("src/calc/__init__.py",)))
    assert coverage.status == "fail", coverage.details  # mul is added without a test
    assert coverage.metadata["base_coverage"] == 100.0 and coverage.metadata["delta"] < 0
    baselines = json.loads((tmp_path / "state" / "coverage_baselines.json").read_text())
    assert list(baselines.values()) == [100.0]  # measured once per base commit, then reused


def test_the_engine_merges_only_what_passes_its_gates(tmp_path: Path) -> None:
    from tests.engine_kit import make_repo, tasks, ticket

    root = make_repo(tmp_path)
    with open(root / "bernstein.yaml", "a") as handle:
        handle.write("quality_gates:\n  lint: true\n  pii_scan: false\n")
    trusted(root)
    ticket(root, "bad", id="BAD", title="Undefined name", scope="small", complexity="low",
           description="write src/bad.py X = undefined_name")
    ticket(root, "good", id="GOOD", title="Clean module",
           description="write src/good.py X = 1")
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle", "--workers", "2"], capture_output=True, text=True,
                            timeout=300)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    state = tasks(root)
    assert state["GOOD"].status == "done"
    assert state["BAD"].status == "failed"
    assert "gates blocked — lint fail: src/bad.py:1: F821" in state["BAD"].result_summary
    files = git(root, "ls-tree", "-r", "--name-only", "main").split()
    assert "src/good.py" in files and "src/bad.py" not in files
    report = json.loads((root / ".sdd/runtime/gates/BAD.json").read_text())
    assert report["overall_pass"] is False and "F821" in by_name(report)["lint"]["digest"]
    lines = [json.loads(x) for x in
             (root / ".sdd/metrics/quality_gates.jsonl").read_text().splitlines()]
    assert {(x["task_id"], x["gate"], x["status"]) for x in lines} == {
        ("BAD", "lint", "fail"), ("BAD", "dlp_scan", "pass"),
        ("GOOD", "lint", "pass"), ("GOOD", "dlp_scan", "pass")}


def test_review_findings_on_names_allowlists_encodings_and_plugins(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  lint: true\n  pii_scan_paths: ['']\n"
                                  "  auto_format: true\n")
    (root / "src" / "réglages.py").write_text("import os\n")
    (root / "src" / "keys.py").write_text('KEY = "AKIAIOSFODNN7REALKEYX"  # latest\n')
    (root / "src" / "legacy.py").write_bytes('NAME = "caf\xe9"\nTOKEN = "AKIAIOSFODNN7LATIN1XX"\n'
                                             .encode("latin-1"))
    report = json.loads(gates(root, "--json").stdout)
    results = by_name(report)
    assert "src/réglages.py" in report["changed_files"]
    assert "src/réglages.py:1: F401" in results["lint"]["digest"]
    assert "src/keys.py:1: AWS Access Key" in results["dlp_scan"]["digest"]
    assert "src/legacy.py:2: AWS Access Key" in results["dlp_scan"]["digest"]
    again = by_name(json.loads(gates(root, "--json").stdout))
    assert again["auto_format"]["cached"] is False and again["lint"]["cached"] is True

    plugins = root / ".bernstein" / "gates"
    plugins.mkdir(parents=True)
    (plugins / "slow.py").write_text(
        "import time\n\nclass Slow:\n    name = 'slow'\n    required = False\n"
        "    condition = 'any_changed'\n    def run(self, *args):\n        time.sleep(30)\n")
    (root / "bernstein.yaml").write_text("quality_gates:\n  lint: false\n  pii_scan: false\n"
                                         "  dlp_scan: false\n  timeout_s: 1\n")
    dropped_in = by_name(json.loads(gates(root, "--json").stdout))
    assert dropped_in["slow"]["status"] == "timeout" and dropped_in["slow"]["required"] is False
    (plugins / "slow.py").write_text("class Needy:\n    name = 'needy'\n"
                                     "    def __init__(self, x):\n        pass\n"
                                     "    def run(self, *args):\n        return {}\n")
    broken = gates(root)
    assert broken.returncode == 2 and "cannot be created without arguments" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1
