"""The cross-model verifier (#20.1, seed 000) against the local OpenAI-compatible server:
a reviewer of another family than the writer, approve / request_changes, blocking with
escalation, a voting quorum, recorded with the gate results; "not configured" without
an endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.sdd.tail import JsonlTail
from tests.conftest import trusted
from tests.engine_kit import git, make_repo, tasks, ticket
from tests.llm_server import llm_server, system_of
from tests.test_gates import by_name, gates

GATES = "quality_gates:\n  lint: false\n  pii_scan: false\n  dlp_scan: false\n"


def verdict(answer: str, *issues: str) -> str:
    return json.dumps({"verdict": answer, "issues": list(issues), "confidence": 0.9})


def test_request_changes_escalates_when_so_configured(tmp_path: Path) -> None:
    """on_request_changes: escalate — the cascade retries on the next model."""
    def answer(body: dict, number: int) -> tuple[int, str]:
        if "different model family" not in system_of(body):
            return 500, "not this test's question"  # the reflector: rule-based instead
        diff = body["messages"][1]["content"]
        if "+VALUE = 1" in diff:
            return 200, verdict("request_changes", "src/value.py:1: VALUE must be 2")
        return 200, verdict("approve")

    with llm_server(answer) as (url, seen):
        root = make_repo(tmp_path, config=GATES + "  cross_model: {enabled: true, "
                         "on_request_changes: escalate}\n"
                         f"llm: {{base_url: '{url}', model: test-model}}\n"
                         "complexity: {iterations: {simple: 1}}\n")
        ticket(root, "val", id="VAL", title="Set VALUE to 2", scope="small", complexity="low",
               description="unless sonnet write src/value.py VALUE = 1\n"
                           "only sonnet write src/value.py VALUE = 2")
        result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                                 "--until-idle"], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
    reviews = [b for b in seen if "different model family" in system_of(b)]
    # the writer was haiku (claude family): the reviewer is seed 000's gemini-flash
    assert {b["model"] for b in reviews} == {"google/gemini-flash-1.5"}
    assert all(b["max_tokens"] <= 512 for b in reviews)
    state = tasks(root)["VAL"]
    assert state.status == "done"
    lines = [r for _, r in JsonlTail(root / ".sdd/metrics/quality_gates.jsonl").read().records
             if r["gate"] == "cross_model"]
    assert [(r["status"], r["verdict"]) for r in lines] == [("fail", "request_changes"),
                                                            ("pass", "approve")]
    assert lines[0]["writer"] == "haiku" and lines[0]["quorum"] == "1 of 1"
    chain = json.loads((root / ".sdd/metrics/cascade_chains.jsonl").read_text()
                       .splitlines()[-1])
    first = chain["attempts"][0]
    assert first["model"] == "haiku" and "cross_model" in first["escalation_reason"]
    report = json.loads((root / ".sdd/runtime/gates/VAL.json").read_text())
    assert by_name(report)["cross_model"]["metadata"]["verdict"] == "approve"
    assert "main" in git(root, "branch", "--list", "main")


def test_request_changes_gets_a_fix_attempt_on_the_reviewed_work(tmp_path: Path) -> None:
    """The default (seed 000: request_changes "creates a fix task"): the writer's model
    fixes its own reviewed work — the next attempt starts from the reviewed branch, with
    the reviewer's issues in its prompt — and is reviewed again; the merged result has
    both the first attempt's work and the fix."""
    def answer(body: dict, number: int) -> tuple[int, str]:
        if "different model family" not in system_of(body):
            return 500, "not this test's question"
        diff = body["messages"][1]["content"]
        if "+VALUE = 1" in diff:
            return 200, verdict("request_changes", "src/value.py:1: VALUE must be 2 "
                                                   "(must_be_2)")
        return 200, verdict("approve")

    with llm_server(answer) as (url, _seen):
        root = make_repo(tmp_path, config=GATES + "  cross_model: {enabled: true}\n"
                         f"llm: {{base_url: '{url}', model: test-model}}\n")
        ticket(root, "val", id="VAL", title="Set VALUE to 2", scope="small", complexity="low",
               description="untold must_be_2 write src/first.py FIRST = 1\n"
                           "untold must_be_2 write src/value.py VALUE = 1\n"
                           "told must_be_2 write src/value.py VALUE = 2\n"
                           f"prompt {tmp_path}/prompt-{{attempt}}.md")
        result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                                 "--until-idle"], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
    state = tasks(root)["VAL"]
    assert state.status == "done"
    chain = json.loads((root / ".sdd/metrics/cascade_chains.jsonl").read_text()
                       .splitlines()[-1])
    attempts = chain["attempts"]
    assert [(a["model"], a["kind"]) for a in attempts] == [("haiku", "agent"),
                                                           ("haiku", "fix")]
    assert attempts[1]["route_reason"].startswith("fix attempt: the cross-model reviewer")
    assert attempts[0]["escalated"] is False
    second = (tmp_path / "prompt-2.md").read_text()
    assert "VALUE must be 2" in second  # the reviewer's issue, in the fix attempt's prompt
    # the fix built on the reviewed work: the first attempt's file is merged with the fix
    assert git(root, "show", "main:src/first.py").strip() == "FIRST = 1"
    assert git(root, "show", "main:src/value.py").strip() == "VALUE = 2"
    lines = [r for _, r in JsonlTail(root / ".sdd/metrics/quality_gates.jsonl").read().records
             if r["gate"] == "cross_model"]
    assert [r["verdict"] for r in lines] == ["request_changes", "approve"]


def test_quorum_not_configured_and_same_family(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init")
    (root / "a.txt").write_text("two\n")
    (root / "bernstein.yaml").write_text(GATES + "  cross_model: {enabled: true}\n")
    trusted(root)
    alone = by_name(json.loads(gates(root, "--json").stdout))["cross_model"]
    assert alone["status"] == "skipped"
    assert alone["details"].startswith("REQUIRED GATE SKIPPED — not configured: no LLM "
                                       "endpoint configured")

    def answer(body: dict, number: int) -> tuple[int, str]:
        approve = body["model"] in ("gemini-a", "gemini-b")
        return 200, verdict("approve") if approve else verdict("request_changes", "a.txt:1: no")

    with llm_server(answer) as (url, seen):
        def config(reviewers: str, quorum: int) -> None:
            (root / "bernstein.yaml").write_text(
                GATES + f"  cross_model: {{enabled: true, reviewers: [{reviewers}], "
                f"quorum: {quorum}}}\n  cache_enabled: false\nllm: {{base_url: '{url}'}}\n")

        config("gemini-a, gemini-b, gpt-c", 2)
        two = by_name(json.loads(gates(root, "--json").stdout))["cross_model"]
        assert two["status"] == "pass" and two["details"] == \
            "approved by 2 of 3 reviewer(s) (quorum 2)"
        config("gemini-a, gpt-c, gpt-d", 2)
        one = gates(root, "--json")
        assert one.returncode == 1
        result = by_name(json.loads(one.stdout))["cross_model"]
        assert result["status"] == "fail" and result["blocked"]
        assert result["details"] == "request_changes: 1 of 3 approved (quorum 2), 2 issue(s)"
        assert "gpt-c: a.txt:1: no" in result["digest"]
        assert sorted(b["model"] for b in seen) == ["gemini-a", "gemini-a", "gemini-b",
                                                    "gpt-c", "gpt-c", "gpt-d"]
    assert os.path.exists(root / ".sdd/metrics/quality_gates.jsonl")
