"""Gates on real projects (#20.9): the project's own environment, its own commands, and
digests that name test ids whatever command launched the tool."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from console.engine.gates.recognise import recognise
from tests.engine_kit import git
from tests.test_gates import CALC_BAD, by_name, gates, make_project

USES_DEP = "from projdep import WORD\n\n\ndef test_word():\n    assert WORD == 'mine'\n"


def project_venv(root: Path) -> Path:
    """A real venv in the project holding a dependency only the project has (projdep);
    the test tools (pytest, ruff, mypy) reach it through a .pth, as an installed dev
    dependency would."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "projdep.py").write_text("WORD = 'mine'\n")
    (site / "tools.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (root / ".gitignore").write_text(".venv/\n")
    return python


def test_tests_run_in_the_projects_venv_and_say_so(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  tests: true\n")
    python = project_venv(root)
    (root / "tests" / "test_dep.py").write_text(USES_DEP)
    result = gates(root, "--json")
    tests = by_name(json.loads(result.stdout))["tests"]
    assert result.returncode == 0, tests  # was: ModuleNotFoundError: No module named 'projdep'
    assert tests["status"] == "pass" and tests["details"] == "1 passed"
    assert f".venv: {python} -m pytest" in tests["metadata"]["ran_with"]
    table = gates(root)
    assert f"tools ran with: .venv: {python}" in table.stdout.replace("\n", "")


def test_custom_test_command_digest_names_the_failing_test(tmp_path: Path) -> None:
    root = make_project(tmp_path, """
        quality_gates:
          tests: true
          test_command: python -m pytest -q -p no:cacheprovider tests
        """)
    project_venv(root)
    (root / "tests" / "test_dep.py").write_text(USES_DEP)
    (root / "src" / "calc" / "__init__.py").write_text(CALC_BAD)
    result = gates(root, "--json")
    assert result.returncode == 1, result.stderr
    tests = by_name(json.loads(result.stdout))["tests"]
    assert tests["details"] == "1 failed, 1 passed"  # one line, the test's own counts
    assert tests["metadata"]["failed_tests"] == ["tests/test_calc.py::test_add"]
    assert tests["metadata"]["recognised"] == "pytest"
    first = tests["digest"].splitlines()[1]
    assert first.startswith("tests/test_calc.py:5: tests/test_calc.py::test_add failed: "
                            "assert -1 == 3"), tests["digest"]
    assert "/.venv/bin" in tests["metadata"]["ran_with"] or ".venv" in \
        tests["metadata"]["ran_with"]


def test_custom_lint_and_type_commands_are_digested(tmp_path: Path) -> None:
    root = make_project(tmp_path, """
        quality_gates:
          lint: true
          type_check: true
          lint_command: ruff check --no-cache src
          type_check_command: python -m mypy --no-incremental --cache-dir=/dev/null src
        """)
    (root / "src" / "calc" / "__init__.py").write_text(
        "import os\n\n\ndef add(a: int, b: int) -> str:\n    return a + b\n")
    result = gates(root, "--json")
    assert result.returncode == 1, result.stderr
    results = by_name(json.loads(result.stdout))
    lint, types = results["lint"], results["type_check"]
    assert lint["details"] == "1 lint violation(s)", lint  # ruff's full (default) format
    assert "src/calc/__init__.py:1: F401" in lint["digest"]
    assert lint["metadata"]["recognised"] == "ruff"
    assert types["details"] == "1 type error(s)" and types["metadata"]["recognised"] == "mypy"
    assert "src/calc/__init__.py:5: Incompatible return value type" in types["digest"]


def test_unrecognised_output_keeps_details_to_one_line(tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text("print('checking\\nstep two\\nsomething broke badly')\nraise SystemExit(3)\n")
    root = make_project(tmp_path, f"""
        quality_gates:
          lint: true
          lint_command: {sys.executable} {script}
        """)
    result = gates(root, "--json")
    lint = by_name(json.loads(result.stdout))["lint"]
    assert lint["details"] == "lint exited 3: something broke badly"
    assert "checking\nstep two\nsomething broke badly" in lint["digest"]


def test_gates_records_its_run_without_an_engine(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  lint: true\n")
    (root / "src" / "calc" / "__init__.py").write_text(CALC_BAD)
    assert not (root / ".sdd").exists()
    assert gates(root).returncode == 1
    lines = [json.loads(x) for x in
             (root / ".sdd/metrics/quality_gates.jsonl").read_text().splitlines()]
    assert ("working-tree", "lint", "fail") in [(x["task_id"], x["gate"], x["status"])
                                                for x in lines]
    assert ".sdd/" in git(root, "status", "--porcelain")  # untracked; diffs leave it out
    again = gates(root, "--json")
    assert again.returncode == 1
    assert json.loads(again.stdout)["changed_files"] == ["src/calc/__init__.py"]


def test_pyright_and_pytest_error_output_recognised() -> None:
    """pyright is not installed here: its output format, as pyright 1.1 prints it."""
    pyright = textwrap.dedent("""\
        /p/src/calc/__init__.py
          /p/src/calc/__init__.py:5:12 - error: Type "int" is not assignable to "str"
        1 error, 0 warnings, 0 informations
        """)
    found = recognise(pyright, Path("/p"))
    assert found.tool == "pyright" and found.count == 1
    assert found.digest.entries[0].location == "src/calc/__init__.py:5"
    collect = "ERROR tests/test_x.py - ModuleNotFoundError: No module named 'nope'\n" \
              "1 error in 0.05s\n"
    found = recognise(collect)
    assert found.tool == "pytest" and found.counts == {"errors": 1}
    assert found.digest.entries[0].message == \
        "tests/test_x.py error: ModuleNotFoundError: No module named 'nope'"


def test_the_whole_suite_runs_when_scoping_selects_no_test(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n  tests: true\n")
    (root / "src" / "calc" / "unused.py").write_text("VALUE = 1\n")  # no test imports it
    tests = by_name(json.loads(gates(root, "--json").stdout))["tests"]
    assert tests["status"] == "pass" and tests["details"] == "1 passed"  # was: skipped
    assert tests["metadata"]["scope"] == "full" and tests["metadata"]["fallback"] is True
    (root / "bernstein.yaml").write_text("quality_gates:\n  tests: true\n"
                                         "  tests_scope_fallback: false\n")
    opted_out = by_name(json.loads(gates(root, "--json").stdout))["tests"]
    assert opted_out["status"] == "skipped" and "tests_scope_fallback: false" in \
        opted_out["details"]
