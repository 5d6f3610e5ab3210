"""comment_quality, review_rubric and agent_test_mutation (#20.2), on real repos; the
rubric against the local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine_kit import git
from tests.llm_server import llm_server
from tests.test_gates import by_name, gates, make_project

OFF = "  lint: false\n  pii_scan: false\n  dlp_scan: false\n"


def test_comment_quality_flags_only_what_the_change_adds(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n" + OFF + "  comment_quality_check: true\n")
    calc = root / "src" / "calc" / "__init__.py"
    calc.write_text(calc.read_text() + '\n\ndef sub(a, b):\n    return a - b\n\n\n'
                    'def mul(a, b):\n    """Multiply."""\n    return a * b\n\n\n'
                    'class _Hidden:\n    pass\n')
    (root / "src" / "calc" / "extra.py").write_text("class Meter:\n    pass\n")
    result = gates(root, "--json")
    assert result.returncode == 0, result.stderr  # optional by default: reported, not blocking
    gate = by_name(json.loads(result.stdout))["comment_quality"]
    assert gate["status"] == "fail" and not gate["blocked"]
    assert gate["details"] == "2 public definition(s) without a docstring"
    assert "src/calc/__init__.py:5: public function sub has no docstring" in gate["digest"]
    assert "src/calc/extra.py:1: public class Meter has no docstring" in gate["digest"]
    assert "add" not in gate["digest"]  # there before the change


def test_review_rubric_scores_the_diff_or_says_not_configured(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n" + OFF + "  review_rubric: true\n")
    (root / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    return a - b\n")
    alone = by_name(json.loads(gates(root, "--json").stdout))["review_rubric"]
    assert alone["status"] == "skipped" and "not configured: no LLM endpoint" in \
        alone["details"]

    def answer(body: dict, number: int) -> tuple[int, str]:
        low = "a - b" in body["messages"][1]["content"]
        return 200, json.dumps({"scores": [
            {"dimension": d, "score": 2 if low else 5, "reasoning": f"{d} judged"}
            for d in ("correctness", "completeness", "code_quality", "edge_cases")]})

    with llm_server(answer) as (url, seen):
        (root / "bernstein.yaml").write_text(
            "quality_gates:\n" + OFF + "  review_rubric: true\n  cache_enabled: false\n"
            f"llm: {{base_url: '{url}'}}\n")
        low = gates(root, "--json")
        assert low.returncode == 1
        gate = by_name(json.loads(low.stdout))["review_rubric"]
        assert gate["status"] == "fail" and gate["details"] == "global score 2.0 < 3.0"
        assert "correctness 2/5: correctness judged" in gate["digest"]
        (root / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
        high = by_name(json.loads(gates(root, "--json").stdout))["review_rubric"]
        assert high["status"] == "pass" and high["metadata"]["global_score"] == 5.0
    assert len(seen) == 2


def test_agent_test_mutation_measures_the_changed_tests(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n" + OFF + "  agent_test_mutation: true\n")
    (root / "src" / "calc" / "__init__.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
        "def positive(a: int) -> bool:\n    return a > 0\n")
    git_commit(root)
    weak = root / "tests" / "test_calc.py"
    weak.write_text("from calc import add, positive\n\n\ndef test_add():\n"
                    "    assert add(1, 2) is not None\n    assert positive(1) is not None\n")
    result = gates(root, "--json")
    assert result.returncode == 1, result.stderr
    gate = by_name(json.loads(result.stdout))["agent_test_mutation"]
    assert gate["status"] == "fail" and gate["blocked"]
    assert gate["details"] == "the changed tests killed 0 of 2 mutant(s) (0%, threshold 50%)"
    assert "src/calc/__init__.py:2: mutant survived: a + b → a - b" in gate["digest"]
    assert "src/calc/__init__.py:6: mutant survived: a > 0 → a <= 0" in gate["digest"]
    weak.write_text("from calc import add, positive\n\n\ndef test_add():\n"
                    "    assert add(1, 2) == 3\n    assert positive(1)\n")
    strong = by_name(json.loads(gates(root, "--json").stdout))["agent_test_mutation"]
    assert strong["status"] == "pass" and strong["metadata"]["killed"] == 2
    assert not (root / "src" / "calc" / "__init__.py").read_text().count("a - b")


def git_commit(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "code")


def test_generated_tests_run_in_a_copy_and_fail_or_pass(tmp_path: Path) -> None:
    root = make_project(tmp_path, "quality_gates:\n" + OFF + "  test_expansion: true\n"
                                  "  integration_test_gen: true\n")
    (root / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    return a - b\n")
    skipped = by_name(json.loads(gates(root, "--json").stdout))
    assert skipped["integration_test_gen"]["details"] == (
        "REQUIRED GATE SKIPPED — not configured: no LLM endpoint configured (set "
        "llm.base_url in bernstein.yaml)")
    assert skipped["test_expansion"]["status"] == "skipped"

    def answer(body: dict, number: int) -> tuple[int, str]:
        if "integration test" in body["messages"][0]["content"]:
            return 200, ("```python\nfrom calc import add\n\n\ndef test_adds():\n"
                         "    assert add(2, 2) == 4\n```")
        return 200, "```python\nfrom calc import add\n\n\ndef test_zero():\n" \
                    "    assert add(0, 0) == 0\n```"

    with llm_server(answer) as (url, _seen):
        (root / "bernstein.yaml").write_text(
            "quality_gates:\n" + OFF + "  test_expansion: true\n  integration_test_gen: true\n"
            f"  cache_enabled: false\nllm: {{base_url: '{url}'}}\n")
        result = gates(root, "--json")
    assert result.returncode == 1, result.stderr
    results = by_name(json.loads(result.stdout))
    integration, expansion = results["integration_test_gen"], results["test_expansion"]
    assert integration["status"] == "fail" and integration["blocked"]
    assert integration["details"] == "1 generated test(s) fail"
    assert "tests/test_bt_integration_test_gen.py::test_adds failed: assert 0 == 4" in \
        integration["digest"]
    assert expansion["status"] == "pass" and expansion["details"] == "1 generated test(s) pass"
    assert not (root / "tests" / "test_bt_integration_test_gen.py").exists()  # a copy ran it
