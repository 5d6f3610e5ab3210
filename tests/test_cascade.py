"""Cascade, reflections, tiers, bandit, AutoFixer and multi-judge review, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.engine.cascade import (
    Bandit,
    CascadeConfig,
    CascadeRouter,
    complexity_tier,
    parse_cascade,
)
from console.engine.reflection import rule_diagnosis
from console.engine.review import Dimension, merge_scores
from console.model import Task
from console.sdd.tail import JsonlTail
from tests.engine_kit import assert_idle_exit, git, make_repo, tasks, ticket
from tests.llm_server import llm_server, system_of

LINT_ONLY = "quality_gates:\n  lint: true\n  pii_scan: false\n  dlp_scan: false\n"
#: one attempt per model, for the tests of what the ladder carries from step to step
ONE_EACH = "complexity: {iterations: {simple: 1}}\n"


def run(root: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle", "--workers", "2"], capture_output=True, text=True,
                            timeout=600, env={**os.environ, **(env or {})})
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    return result


def records(root: Path, rel: str) -> list[dict]:
    return [r for _, r in JsonlTail(root / ".sdd" / rel).read().records]


def test_fails_until_opus_with_rule_reflections(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config=LINT_ONLY + ONE_EACH)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    ticket(root, "feat", id="FEAT", title="Add the feature module", scope="small",
           complexity="low", description=(
               f"prompt {prompts}/{{attempt}}-{{model}}.md\n"
               "usage 20000 4000\n"
               "unless opus write src/feature.py VALUE = missing_name\n"
               "only opus write src/feature.py VALUE = 1"))
    run(root)
    task = tasks(root)["FEAT"]
    assert task.status == "done"
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert [a["model"] for a in chain["attempts"]] == ["haiku", "sonnet", "opus"]
    assert [a["success"] for a in chain["attempts"]] == [False, False, True]
    assert [a["escalated"] for a in chain["attempts"]] == [True, True, False]
    for attempt in chain["attempts"][:2]:
        assert attempt["escalation_reason"].startswith("required gate blocked: gates blocked "
                                                       "— lint fail: src/feature.py:1: F821")
    costs = [a["cost_usd"] for a in chain["attempts"]]
    assert costs == [0.04, 0.12, 0.2]  # 20k in + 4k out at haiku, sonnet, opus prices
    assert chain["total_cost_usd"] == 0.36 and chain["first_attempt_cost_usd"] == 0.04
    assert chain["escalation_overhead_usd"] == 0.32 and chain["final_model"] == "opus"
    assert chain["succeeded"] is True and chain["task_id"] == "FEAT"
    reflections = records(root, "metrics/reflections.jsonl")
    assert [(r["iteration"], r["model"], r["source"], r["reused"]) for r in reflections] == [
        (1, "haiku", "rules", False), (2, "sonnet", "rules", True)]
    diagnosis = reflections[0]["diagnosis"]
    assert "F821: a name is used but never defined or imported" in diagnosis["why"]
    assert "rule-based" in diagnosis["why"] and "src/feature.py:1" in diagnosis["focus"]
    assert reflections[0]["files_changed"] == ["src/feature.py"]
    second_prompt = (prompts / "2-sonnet.md").read_text()
    assert "# Prior iteration reflections" in second_prompt
    assert "## Iteration 1 (haiku)" in second_prompt and "F821" in second_prompt
    assert "Files changed in that attempt: src/feature.py" in second_prompt
    assert git(root, "show", "main:src/feature.py") == "VALUE = 1\n"
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "console", "-C", str(root), "status", "--json"],
        capture_output=True, text=True).stdout)
    assert status["chains"] == {"total": 1, "escalated": 1}
    assert status["reflections"]["total"] == 2


def test_llm_reflections_and_a_review_with_a_deviant_judge(tmp_path: Path) -> None:
    def answer(body: dict, number: int) -> tuple[int, str]:
        system = system_of(body)
        if "four sections" in system:
            return 200, ("## What failed\nLint failed on feature.py.\n## Why it failed\nos is "
                         "imported and never used.\n## What to try differently\nDrop the "
                         "import.\n## Files/functions to focus on\nsrc/feature.py:1")
        if "Score each dimension" in system:
            judge = sum(1 for s in seen if "Score each dimension" in system_of(s))
            score = 1 if judge == 3 else 4  # one deviant judge
            return 200, json.dumps({"scores": [
                {"dimension": d, "score": score, "reasoning": f"{d} looks {score}"}
                for d in ("correctness", "completeness", "code_quality", "edge_cases")]})
        return 500, "unexpected prompt"

    with llm_server(answer) as (url, seen):
        root = make_repo(tmp_path, config=LINT_ONLY + ONE_EACH + f"llm: {{base_url: '{url}', "
                                                      "model: test-judge}\n")
        ticket(root, "rev", id="REV", title="Reviewed feature", scope="small",
               complexity="low", require_review=True, description=(
                   "unless sonnet write src/feature.py VALUE = missing_name\n"
                   "only sonnet write src/feature.py VALUE = 2"))
        run(root)
    assert tasks(root)["REV"].status == "done"
    [reflection] = records(root, "metrics/reflections.jsonl")
    assert reflection["source"] == "llm" and reflection["reused"] is False
    assert reflection["model"] == "haiku"  # the attempt's model (#20.8), not the reflector's
    assert reflection["reflected_by"] == "test-judge"
    assert reflection["diagnosis"]["why"] == "os is imported and never used."
    [review] = records(root, "metrics/reviews.jsonl")
    assert review["passed"] is True and review["global_score"] == 4.0
    assert review["merged"] == {"correctness": 4.0, "completeness": 4.0, "code_quality": 4.0,
                                "edge_cases": 4.0}
    dropped = [s for s in review["scores"] if s["dropped"]]
    assert len(dropped) == 4 and {s["score"] for s in dropped} == {1.0}
    calls = records(root, "metrics/llm_calls.jsonl")
    assert len(calls) == 4 and all(c["prompt_tokens"] == 100 for c in calls)
    assert sorted(c["purpose"] for c in calls) == ["reflection", "review", "review", "review"]
    assert "k-" not in json.dumps(calls)


def test_autofixer_fixes_a_pure_lint_failure_without_a_new_attempt(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config=LINT_ONLY + ONE_EACH)
    ticket(root, "fix", id="FIX", title="Needs a mechanical fix", scope="small",
           complexity="low", description="write src/mod.py import os")
    run(root)
    task = tasks(root)["FIX"]
    assert task.status == "done"
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert [(a["kind"], a["model"], a["success"]) for a in chain["attempts"]] == [
        ("autofix", "ruff --fix", True), ("agent", "haiku", True)]
    assert git(root, "show", "main:src/mod.py") == ""  # the unused import is gone


def test_low_confidence_output_escalates(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config=ONE_EACH)
    ticket(root, "unsure", id="UNSURE", title="Unsure agent", scope="small", complexity="low",
           description="write out/x.txt {model}\nunless opus say I'm not sure this is right")
    run(root)
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert [a["model"] for a in chain["attempts"]] == ["haiku", "sonnet", "opus"]
    assert chain["attempts"][0]["escalation_reason"].startswith(
        "low-confidence output: the agent's output says \"i'm not sure\"")
    assert git(root, "show", "main:out/x.txt") == "opus\n"


def test_top_of_the_ladder_gives_up_with_every_reason(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    ticket(root, "never", id="NEVER", title="Never works", scope="small", complexity="low",
           description="exit 3")
    run(root)
    task = tasks(root)["NEVER"]
    assert task.status == "failed"
    # a simple task (seed 002): two iterations on each model of the ladder
    assert task.result_summary.startswith("gave up after 6 attempt(s) (the top of the ladder "
                                          "was reached): #1 haiku: hard failure")
    assert "#6 opus: hard failure" in task.result_summary
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert chain["succeeded"] is False and chain["final_model"] == "opus"
    assert [a["model"] for a in chain["attempts"]] == ["haiku", "haiku", "sonnet", "sonnet",
                                                        "opus", "opus"]
    assert "iteration 2 on haiku (simple tier)" in chain["attempts"][1]["route_reason"]


def test_a_tickets_max_retries_is_honoured(tmp_path: Path) -> None:
    """max_retries: 1 → one attempt and one retry, then failed saying why (the ladder
    would have gone on to opus); max_retries: 0 → no retry at all."""
    root = make_repo(tmp_path)
    ticket(root, "once", id="ONCE", title="Retried once", scope="small", complexity="low",
           description="exit 3", max_retries=1)
    ticket(root, "never", id="NONE", title="Not retried", scope="small", complexity="low",
           description="exit 3", max_retries=0)
    run(root)
    once, none = tasks(root)["ONCE"], tasks(root)["NONE"]
    assert once.status == none.status == "failed"
    assert once.max_retries == 1 and none.max_retries == 0  # Bernstein's field, written
    assert once.result_summary.startswith(
        "gave up after 2 attempt(s) (the ticket's max_retries (1) was reached)")
    assert none.result_summary.endswith("(the ticket's max_retries (0) was reached)")
    chains = {c["task_id"]: c for c in records(root, "metrics/cascade_chains.jsonl")}
    assert len(chains["ONCE"]["attempts"]) == 2 and len(chains["NONE"]["attempts"]) == 1
    bad = ticket(root, "bad", title="Bad limit", max_retries=-1)
    from console.sdd.tickets import TicketError, parse_ticket

    refused = parse_ticket(bad.read_bytes(), "bad.yaml")
    assert isinstance(refused, TicketError) and "max_retries -1" in str(refused)


def _task(**fields: object) -> Task:
    return Task(id="t", title="t", status="open", **fields)  # type: ignore[arg-type]


def test_router_start_pin_tiers_and_bandit(tmp_path: Path) -> None:
    config = CascadeConfig(seed=1, epsilon=0.0, min_observations=3)
    bandit = Bandit(tmp_path / "bandit.json", config)
    router = CascadeRouter(config, bandit)
    assert router.first(_task()).model == "haiku"
    assert router.first(_task(role="security")).model == "sonnet"
    assert router.first(_task(priority=1)).model == "sonnet"
    assert router.first(_task(model="opus")).reason == "model pinned"
    for _ in range(3):
        bandit.record("qa", "haiku", False)
    step = router.first(_task(role="qa"))
    assert step.model == "sonnet" and "haiku succeeded 0/3 times for role qa" in step.reason
    reloaded = Bandit(tmp_path / "bandit.json", config)  # persisted in .sdd/routing/
    assert reloaded.arms["qa|haiku"] == {"observations": 3, "successes": 0}
    simple = _task(scope="small", estimated_minutes=20)
    # seed 002: trivial escalates at once, simple and up get a second iteration
    assert router.next(simple, "haiku", "hard failure", "trivial", 1).model == "sonnet"
    assert router.next(simple, "haiku", "hard failure", "simple", 1).model == "haiku"
    assert router.next(simple, "haiku", "hard failure", "simple", 2).model == "sonnet"
    assert router.next(simple, "sonnet", "hard failure", "standard", 1).model == "sonnet"
    assert router.next(simple, "opus", "hard failure", "simple", 2) is None


def test_complexity_tiers_and_risk_bump() -> None:
    config = parse_cascade(None, {"core_paths": ["src/core/"]})
    assert complexity_tier(_task(scope="small", estimated_minutes=10, complexity="low"),
                           config)[0] == "trivial"
    assert complexity_tier(_task(scope="small", estimated_minutes=30), config)[0] == "simple"
    assert complexity_tier(_task(estimated_minutes=60), config)[0] == "standard"
    assert complexity_tier(_task(scope="large"), config)[0] == "complex"
    bumped, why = complexity_tier(_task(scope="small", estimated_minutes=10, complexity="low",
                                        owned_files=("src/core/x.py",)), config)
    assert bumped == "simple" and "core paths" in why
    deps, _ = complexity_tier(_task(scope="small", estimated_minutes=30,
                                    depends_on=("a", "b", "c")), config)
    assert deps == "standard"


def test_rule_diagnosis_reads_mypy_and_pytest() -> None:
    mypy = rule_diagnosis("type_check", "1 unique error(s):\nsrc/a.py:4: Incompatible return "
                                        "value type  [return-value]")
    assert "returns a value of the wrong type" in mypy.why
    tests = rule_diagnosis("tests", "1 unique error(s):\ntests/t.py:5: tests/t.py::test_add "
                                    "failed: assert -1 == 3")
    assert "a test expected 3 but got -1" in tests.why and tests.focus == "tests/t.py:5"


def test_merge_drops_outliers_by_median() -> None:
    dims = [Dimension("correctness", 1.0)]
    answers = [{"judge": f"j{i}", "scores": {"correctness": {"score": s, "reasoning": ""}}}
               for i, s in enumerate((4, 5, 1))]
    merged, scored = merge_scores(answers, dims)
    assert merged == {"correctness": 4.5}
    assert [s["dropped"] for s in scored] == [False, False, True]


def test_simple_type_errors_go_to_the_cheapest_model_first(tmp_path: Path) -> None:
    from console.engine.autofix import simple_type_errors

    assert simple_type_errors("type_check", '2 unique error(s):\na.py:1: Name "x" is not '
                                            'defined  [name-defined]\nb.py:2: Cannot find '
                                            'implementation or library stub  [import]')
    # seed 002's TypeMismatch: assigned, passed or returned with the wrong type
    assert simple_type_errors("type_check", 'a.py:4: Incompatible return value type (got '
                                            '"str", expected "int")  [return-value]\nb.py:1: '
                                            'Incompatible types in assignment  [assignment]')
    assert not simple_type_errors("type_check", 'a.py:4: Signature of "f" incompatible with '
                                                'supertype "B"  [override]')
    assert not simple_type_errors("lint", "a.py:1: F401 `os` imported but unused")
    config = "quality_gates:\n  lint: false\n  type_check: true\n  pii_scan: false\n" \
             "  dlp_scan: false\n"
    root = make_repo(tmp_path, config=config)
    ticket(root, "typed", id="TYPED", title="Needs an import", scope="large", priority=1,
           description="unless haiku write src/typed.py x: int = missing_name\n"
                       "only haiku write src/typed.py x: int = 1")
    run(root)
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert [(a["model"], a["kind"], a["success"]) for a in chain["attempts"]] == [
        ("sonnet", "agent", False), ("haiku", "autofix", True)]
    assert "AutoFixer" in chain["attempts"][1]["route_reason"]


def test_a_review_nobody_answers_fails_without_escalating(tmp_path: Path) -> None:
    with llm_server(lambda body, n: (500, "down")) as (url, _seen):
        root = make_repo(tmp_path, config=f"llm: {{base_url: '{url}', max_retries: 0}}\n")
        ticket(root, "rev", id="REV", title="Reviewed", scope="small", complexity="low",
               require_review=True, description="write out/x.txt x")
        run(root)
    task = tasks(root)["REV"]
    assert task.status == "failed" and task.result_summary.startswith("review: no judge")
    [chain] = records(root, "metrics/cascade_chains.jsonl")
    assert len(chain["attempts"]) == 1 and chain["attempts"][0]["attempt_number"] == 0
