"""Gate pieces on their own: digests, config synthesis, conditions, test scoping."""

from __future__ import annotations

from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.pipeline import condition_met
from console.engine.gates.python_gates import select_tests
from console.sdd.gate_config import GateSpec, parse_quality_gates

RUFF = """\
src/a.py:1:8: F401 [*] `os` imported but unused
src/a.py:1:8: F401 [*] `os` imported but unused
src/b.py:3:1: E302 expected 2 blank lines, found 1
Found 3 errors.
"""
MYPY = """\
src/a.py:4: error: Incompatible return value type (got "str", expected "int")  [return-value]
src/a.py:9:5: error: Name "y" is not defined  [name-defined]
src/a.py:4: note: this is a note, not an error
"""
CARGO = """\
warning: unused import: `std::collections::BTreeMap`
 --> crates/core/src/lib.rs:4:5
error[E0308]: mismatched types
 --> crates/core/src/session.rs:42:24
error[E0433]: failed to resolve: use of undeclared crate or module `serde_json`
  --> crates/core/src/session.rs:58:19
error[E0308]: mismatched types
 --> crates/core/src/session.rs:42:24
main.c:12:5: error: expected ';' before 'return'
"""


def test_ruff_mypy_and_compiler_digests(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\n\n\ndef f() -> int:\n    return 'x'\n")
    ruff = dg.ruff_digest(RUFF, tmp_path)
    assert [(e.file, e.line) for e in ruff.entries] == [("src/a.py", 1), ("src/b.py", 3)]
    assert ruff.entries[0].source == "import os"
    assert ruff.render().startswith("2 unique error(s):\nsrc/a.py:1: F401")
    mypy = dg.mypy_digest(MYPY, tmp_path)
    assert [(e.line, e.message[:12]) for e in mypy.entries] == [(4, "Incompatible"),
                                                                (9, 'Name "y" is ')]
    assert mypy.entries[0].source == "def f() -> int:"
    cargo = dg.generic_digest(CARGO)
    assert [e.render().splitlines()[0] for e in cargo.entries] == [
        "crates/core/src/session.rs:42: error[E0308]: mismatched types",
        "crates/core/src/session.rs:58: error[E0433]: failed to resolve: use of undeclared "
        "crate or module `serde_json`",
        "main.c:12: expected ';' before 'return'",
    ]


def test_digest_caps_at_ten_and_says_how_many_were_left_out() -> None:
    output = "\n".join(f"f.py:{i}:1: E501 line too long" for i in range(1, 26))
    digest = dg.ruff_digest(output)
    assert len(digest.entries) == 10 and digest.left_out == 15
    assert digest.render().endswith("… and 15 more left out")
    assert digest.render().startswith("25 unique error(s):")


def test_pytest_failure_entry_finds_the_assertion_and_the_frame() -> None:
    text = ("assert -1 == 3\n tests/test_calc.py:5: in test_add\n    assert add(1, 2) == 3\n"
            "E   assert -1 == 3\nE    +  where -1 = add(1, 2)\n")
    entry = dg.pytest_failure_entry("tests/test_calc.py::test_add", text, None)
    assert (entry.file, entry.line) == ("tests/test_calc.py", 5)
    assert entry.message == "tests/test_calc.py::test_add failed: assert -1 == 3"


def test_default_pipeline_comes_from_the_booleans() -> None:
    config = parse_quality_gates({"type_check": True, "tests": True, "auto_format": True,
                                  "dlp_scan": False, "benchmark": {"enabled": True,
                                                                   "command": "x"}})
    assert [(s.name, s.required, s.condition) for s in config.pipeline] == [
        ("auto_format", False, "any_changed"), ("lint", True, "always"),
        ("type_check", True, "python_changed"), ("tests", True, "python_changed"),
        ("pii_scan", True, "any_changed"), ("benchmark", True, "always")]
    explicit = parse_quality_gates({"pipeline": [
        {"name": "tests", "condition": "changed_files.any('.py')", "required": False}]})
    assert explicit.pipeline == (GateSpec("tests", False, "python_changed"),)
    assert parse_quality_gates(None).pipeline[0].name == "lint"


def test_conditions() -> None:
    cases = {
        "always": [(), True],
        "any_changed": [(), False, ("README.md",), True],
        "python_changed": [("README.md",), False, ("a/b.py",), True],
        "tests_changed": [("src/a.py",), False, ("tests/test_a.py",), True],
        "deps_changed": [("src/a.py",), False, ("requirements-dev.txt",), True,
                         ("pyproject.toml",), True],
    }
    for condition, pairs in cases.items():
        for index in range(0, len(pairs), 2):
            assert condition_met(condition, pairs[index]) is pairs[index + 1], condition


def test_tests_are_scoped_to_what_changed(tmp_path: Path) -> None:
    (tmp_path / "src" / "shop").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "src" / "shop" / "cart.py").write_text("X = 1\n")
    (tmp_path / "src" / "shop" / "price.py").write_text("Y = 1\n")
    (tmp_path / "tests" / "test_cart.py").write_text("from shop.cart import X\n")
    (tmp_path / "tests" / "test_price.py").write_text("import shop.price\n")
    (tmp_path / "tests" / "test_other.py").write_text("import json\n")
    (tmp_path / "tests" / "conftest.py").write_text("import shop.cart\n")
    assert select_tests(tmp_path, ["src/shop/cart.py"]) == ["tests/test_cart.py"]
    assert select_tests(tmp_path, ["src/shop/price.py", "tests/test_other.py"]) == [
        "tests/test_other.py", "tests/test_price.py"]
    assert select_tests(tmp_path, ["README.md"]) == []


def test_scoping_follows_conftest_transitive_and_deleted_imports(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "api.py").write_text("from pkg import util\n")
    (tmp_path / "tests" / "unit" / "test_api.py").write_text("import pkg.api\n")
    (tmp_path / "tests" / "unit" / "test_json.py").write_text("import json\n")
    (tmp_path / "tests" / "test_old.py").write_text("from pkg.gone import thing\n")
    assert select_tests(tmp_path, ["pkg/util.py"]) == ["tests/unit/test_api.py"]
    assert select_tests(tmp_path, ["tests/unit/conftest.py"]) == [
        "tests/unit/test_api.py", "tests/unit/test_json.py"]
    assert select_tests(tmp_path, [], ["pkg/gone.py"]) == ["tests/test_old.py"]


def test_tool_fingerprint_reads_pip_launchers_and_asks_dispatchers(tmp_path: Path) -> None:
    """A pip console-script launcher is fingerprinted by its file (pip rewrites it on
    every upgrade) without being run; a shell dispatcher (pyenv, asdf) is asked for
    `--version`, so a switch behind the same shim still invalidates the cache."""
    import os
    import sys

    from console.engine.gates.base import _version_output, tool_fingerprint

    ran = tmp_path / "ran"
    launcher = tmp_path / "pytest"
    launcher.write_text(f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                        f"open({str(ran)!r}, 'w').close()\nfrom pytest import console_main\n"
                        "if __name__ == '__main__':\n    sys.exit(console_main())\n")
    launcher.chmod(0o755)
    first = tool_fingerprint((str(launcher),))
    assert not ran.exists()  # read, not run
    os.utime(launcher, ns=(1, 1))  # what a reinstall does to it
    assert tool_fingerprint((str(launcher),)) != first

    shim = tmp_path / "mypy"
    shim.write_text('#!/usr/bin/env bash\nprogram="${0##*/}"\necho "$program 1.0"\n')
    shim.chmod(0o755)
    assert tool_fingerprint((str(shim),)).endswith("mypy 1.0")
    shim.write_text('#!/usr/bin/env bash\nprogram="${0##*/}"\necho "$program 2.0"\n')
    _version_output.cache_clear()  # asked once per process; a new run asks again
    assert tool_fingerprint((str(shim),)).endswith("mypy 2.0")
