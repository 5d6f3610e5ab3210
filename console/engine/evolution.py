"""Evolution proposals (seed 001): the project's metrics → concrete changes with a diff.

`analyse` reads .sdd/metrics/ (roles that fail, costly first attempts, gates that
often fail, slow roles) and proposes edits to role templates or bernstein.yaml,
each with a rationale, a category, a confidence, its target files and a unified
diff. Risk comes from the target files as Bernstein's RiskClassifier decides it
(L0 config, L1 template, L2 logic, L3 structural; no file is L2), and the
decision from Bernstein's ApprovalGate matrix: L0/L1 with high confidence are
applied automatically (through the evolution gate); everything else is deferred
to a human in Bernstein's own deferred.jsonl / decisions.jsonl format.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import statistics
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.sdd.confine import UnsafePath, is_safe_id, within
from console.sdd.evolution_codec import encode_experiment
from console.sdd.fileio import append_jsonl, read_regular_file
from console.sdd.paths import Kind, SddPaths
from console.sdd.tail import JsonlTail

RISK_NAMES = {0: "config", 1: "template", 2: "logic", 3: "structural"}
STRUCTURAL = (".py", ".pyc", ".pyd")
STRUCTURAL_NAMES = ("pyproject.toml", "setup.cfg", "setup.py")


@dataclass(frozen=True, slots=True)
class Proposal:
    proposal_id: str
    title: str
    category: str
    rationale: str
    confidence: float
    target_files: tuple[str, ...]
    diff: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def risk(self) -> int:
        return classify(self.target_files)

    @property
    def diff_sha(self) -> str:
        return hashlib.sha256(self.diff.encode()).hexdigest()[:16]


def classify(target_files: tuple[str, ...] | list[str]) -> int:
    """Bernstein's RiskClassifier: per file, highest wins; no file at all is L2."""
    if not target_files:
        return 2
    level = 0
    for path in target_files:
        name = Path(path).name
        parts = Path(path).parts
        if path.endswith(STRUCTURAL) or name in STRUCTURAL_NAMES:
            file_level = 3
        elif "templates" in parts:
            file_level = 1
        elif parts[:1] == (".sdd",) and name.endswith((".yaml", ".yml", ".json", ".toml")):
            file_level = 2 if re.search(r"routing|orchestrator|logic|policy", name) else 0
        else:
            file_level = 2
        level = max(level, file_level)
    return level


def decide(risk: int, confidence: float) -> tuple[str, str]:
    """Bernstein's ApprovalGate._decide: (outcome, reason)."""
    label = f"L{risk}_{RISK_NAMES[risk].upper()}"
    if risk >= 3:
        return "blocked", f"{label} changes require human-only review and cannot be auto-applied"
    if risk == 2:
        if confidence >= 0.70:
            return "human_review_4h", f"{label} change (confidence={confidence:.2f}) — human " \
                                      "review within 4h"
        return "human_review_immediate", f"Low confidence ({confidence:.2f}) — immediate " \
                                         "human review required"
    if confidence >= 0.95:
        return "auto_approved", (f"High confidence ({confidence:.2f}) reversible "
                                 f"{RISK_NAMES[risk]} change — auto-approved")
    if confidence >= 0.85:
        return "auto_approved_audit", f"{label} change (confidence={confidence:.2f}) — " \
                                      "auto-approved with audit"
    if confidence >= 0.70:
        return "human_review_4h", f"{label} change (confidence={confidence:.2f}) — human " \
                                  "review within 4h"
    return "human_review_immediate", f"Low confidence ({confidence:.2f}) — immediate human " \
                                     "review required"


def unified_diff(path: str, before: str, after: str) -> str:
    old = "/dev/null" if not before else f"a/{path}"
    lines = difflib.unified_diff(before.splitlines(keepends=True),
                                 after.splitlines(keepends=True), old, f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def _records(paths: SddPaths, kind: Kind) -> list[dict[str, Any]]:
    tail = JsonlTail(paths.of(kind))
    out = []
    while True:
        batch = tail.read(16 * 1024 * 1024)
        out += [r for _, r in batch.records]
        if not batch.more:
            return out


def _read(root: Path, rel: str) -> str:
    """A template of the project, "" when absent; only a regular file inside the project,
    reached through no link, of at most 1 MiB (its name holds a role from data)."""
    try:
        path = within(root, rel, what="template")
    except UnsafePath:
        return ""
    data, _problem = read_regular_file(path, rel, 1024 * 1024)
    return (data or b"").decode("utf-8", "replace")


def _new_id() -> str:
    return f"EVO-{time.strftime('%Y%m%d')}-{uuid.uuid4().hex[:8]}"


def _set_yaml_key(text: str, section: str, key: str, value: str) -> str:
    """Set `section.key: value` in YAML text, keeping everything else (and its comments)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if re.match(rf"^{re.escape(section)}:\s*(#.*)?$", line):
            end = index + 1
            while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end]):
                if re.match(rf"^\s+{re.escape(key)}:", lines[end]):
                    indent = len(lines[end]) - len(lines[end].lstrip())
                    child = end + 1  # a block value's own lines go with it
                    while child < len(lines) and lines[child].strip() and \
                            len(lines[child]) - len(lines[child].lstrip()) > indent:
                        child += 1
                    lines[end:child] = [f"  {key}: {value}"]
                    return "\n".join(lines) + "\n"
                end += 1
            lines.insert(index + 1, f"  {key}: {value}")
            return "\n".join(lines) + "\n"
    suffix = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{suffix}{section}:\n  {key}: {value}\n"


def analyse(paths: SddPaths) -> list[Proposal]:
    """Proposals from what the metrics show; each with the evidence behind it."""
    root = paths.root
    chains = _records(paths, Kind.CHAINS)
    gates = _records(paths, Kind.GATE_LINES)
    reflections = _records(paths, Kind.REFLECTIONS)
    proposals: list[Proposal] = []

    by_role: dict[str, list[dict]] = defaultdict(list)
    for chain in chains:
        by_role[str(chain.get("role") or "backend")].append(chain)
    for role, items in sorted(by_role.items()):
        if not is_safe_id(role):  # it names template files: a role from data is checked
            continue
        failed = [c for c in items if not c.get("succeeded")]
        if len(items) >= 3 and len(failed) / len(items) >= 0.5:
            patterns = Counter(str(r.get("error_pattern"))[:160] for r in reflections
                               if r.get("error_pattern")
                               and any(r.get("task_id") == c.get("task_id") for c in failed))
            lessons = [p for p, _ in patterns.most_common(3)] or \
                [str(c.get("attempts", [{}])[-1].get("escalation_reason", ""))[:160]
                 for c in failed[:3]]
            rel = f"templates/roles/{role}/system_prompt.md"
            before = _read(root, rel) or f"You are the {role} agent.\n"
            after = before.rstrip("\n") + "\n\n## Lessons from failed attempts\n" + "".join(
                f"- Avoid: {lesson}\n" for lesson in lessons if lesson)
            proposals.append(Proposal(
                _new_id(), f"Teach the {role} role what keeps failing", "role_templates",
                f"{len(failed)} of {len(items)} {role} task chains failed; the same errors "
                "recur. Adding them to the role's prompt warns the next agent.",
                round(min(0.9, 0.5 + len(failed) / len(items) / 2), 2), (rel,),
                unified_diff(rel, _read(root, rel), after),
                {"chains": len(items), "failed": len(failed), "lessons": lessons}))

        firsts = [c["attempts"][0] for c in items if c.get("attempts")]
        cheap = [a for a in firsts if "haiku" in str(a.get("model", "")).lower()]
        if len(cheap) >= 3 and sum(not a.get("success") for a in cheap) / len(cheap) >= 0.6:
            rel = f"templates/roles/{role}/config.yaml"
            before = _read(root, rel)
            if re.search(r"(?m)^model:", before):
                after = re.sub(r"(?m)^model:.*$", "model: sonnet", before)
            else:
                after = before + ("" if not before or before.endswith("\n") else "\n") + \
                    "model: sonnet\n"
            proposals.append(Proposal(
                _new_id(), f"Start {role} tasks on sonnet", "model_routing",
                f"{sum(not a.get('success') for a in cheap)} of {len(cheap)} first attempts on "
                f"haiku failed for {role}; each cost an escalation.", 0.8, (rel,),
                unified_diff(rel, before, after), {"first_attempts_on_haiku": len(cheap)}))

    runs: dict[str, Counter[str]] = defaultdict(Counter)
    for line in gates:
        runs[str(line.get("gate"))][str(line.get("status"))] += 1
    lint = runs.get("lint", Counter())
    total = sum(lint.values())
    if lint["fail"] >= 3 and lint["fail"] / total >= 0.2:
        rel = "bernstein.yaml"
        before = _read(root, rel)
        after = _set_yaml_key(before, "quality_gates", "auto_format", "true")
        if after != before:
            proposals.append(Proposal(
                _new_id(), "Format changes before linting", "policy_update",
                f"lint failed {lint['fail']} of {total} runs; ruff format first removes the "
                "mechanical part of those failures.", 0.75, (rel,),
                unified_diff(rel, before, after), {"lint_runs": total, "lint_failures":
                                                   lint["fail"]}))

    latencies: dict[str, list[float]] = defaultdict(list)
    for chain in chains:
        for attempt in chain.get("attempts") or []:
            latencies[str(chain.get("role"))].append(float(attempt.get("latency_s") or 0))
    for role, values in sorted(latencies.items()):
        if len(values) >= 5 and statistics.median(values) > 0.8 * 1800:
            rel = "bernstein.yaml"
            before = _read(root, rel)
            after = _set_yaml_key(before, "agents", "timeouts", "{small: 1800, medium: 3600, "
                                                                "large: 7200}")
            proposals.append(Proposal(
                _new_id(), f"Give {role} agents more time", "policy_update",
                f"the median {role} attempt took {statistics.median(values):.0f} s, close to "
                "the medium-scope timeout.", 0.7, (rel,), unified_diff(rel, before, after),
                {"median_latency_s": statistics.median(values)}))
    return [p for p in proposals if p.diff]


def record_proposal(paths: SddPaths, proposal: Proposal, outcome: str, reason: str) -> None:
    """Bernstein's three files, as its evolution loop writes them for a routed proposal."""
    now = time.time()
    risk = proposal.risk
    requires_human = outcome not in ("auto_approved", "auto_approved_audit")
    append_jsonl(paths.of(Kind.DECISIONS), [{
        "proposal_id": proposal.proposal_id, "risk_level": RISK_NAMES[risk],
        "confidence": proposal.confidence, "outcome": outcome, "reason": reason,
        "requires_human": requires_human, "decided_at": now, "reviewer": None}])
    if requires_human:
        append_jsonl(paths.of(Kind.DEFERRED), [{
            "proposal_id": proposal.proposal_id, "title": proposal.title,
            "category": proposal.category, "description": proposal.rationale,
            "confidence": proposal.confidence, "reason": reason, "deferred_at": now,
            "target_files": list(proposal.target_files), "risk_level": f"L{risk}",
            "diff": proposal.diff, "diff_sha": proposal.diff_sha,
            "evidence": proposal.evidence}])
        append_jsonl(paths.of(Kind.EXPERIMENTS), [encode_experiment(
            proposal_id=proposal.proposal_id, title=proposal.title,
            risk_level=RISK_NAMES[risk], accepted=False,
            reason=f"Deferred for human review: {reason}", timestamp=now)])


def known_diffs(paths: SddPaths) -> set[str]:
    """Diffs already proposed (any state): the same change is not proposed twice."""
    return {str(r.get("diff_sha")) for kind in (Kind.DEFERRED, Kind.EXPERIMENTS)
            for r in _records(paths, kind) if r.get("diff_sha")}
