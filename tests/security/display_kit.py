"""The hostile-string corpus of issue #16 part 1, a project that puts it in every field
a view or a text command shows, and the check that what reached the screen is text.

Shared by tests/security/test_display_*.py (a kit, not a test module).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from console.sdd.skeleton import init_project
from tests.conftest import append, task_record

#: the distinctive payloads: none may ever reach a terminal as bytes
OSC52_PAYLOAD = "ZWNobyBwd25lZCB8IHNo"  # base64 of a shell command
OSC8_URL = "https://evil.example/steal"

HOSTILE: dict[str, str] = {
    "osc52_bel": f"\x1b]52;c;{OSC52_PAYLOAD}\x07",
    "osc52_st": f"\x1b]52;c;{OSC52_PAYLOAD}\x1b\\",
    "osc8": f"\x1b]8;;{OSC8_URL}\x1b\\click me\x1b]8;;\x1b\\",
    "osc_title": "\x1b]0;owned\x07",
    "csi_clear": "\x1b[2J\x1b[3J\x1b[H",
    "csi_cursor": "\x1b[10A\x1b[5;5H\x1b[K\x1b[?25l",
    "sgr_conceal": "\x1b[8mhidden text\x1b[0m",
    "dcs": "\x1bP1$r0m\x1b\\",
    "apc": "\x1b_Gf=100;AAAA\x1b\\",
    "pm_sos": "\x1b^pm\x1b\\\x1bXsos\x1b\\",
    "bare_esc": "x\x1by",
    "c1_csi": "\x9b2J\x9d0;c1 title\x9c",
    "markup_close": "[/]",
    "markup_link": "[link=https://x]y[/link]",
    "markup_style": "[bold red]loud",
    "markup_var": "[$accent]v[/]",
    "bidi": "\u202eevil\u202c \u2066iso\u2069",
    "zero_width": "a\u200bb\u200dc\ufeffd",
    "nul_del_bel": "\x00\x7f\x07\x08",
    "line_breaks": "one\ntwo\rthree\u2028four",
}
EVIL = "".join(HOSTILE.values())
LONG_TITLE = "L" * 10_000 + EVIL
MARKUP_ID = "T-[/]-1"  # a task id Rich markup chokes on
TASK_ID = "T-evil"  # a plain id whose every other field is hostile

#: what may never be in text shown on a screen or printed by a command
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f"
                      "\u2028\u2029\ufeff\ud800-\udfff]")


def control_in(text: str) -> list[str]:
    """The control characters (and invisible reorderers) in `text`: [] when clean."""
    return sorted({repr(m.group()) for m in _CONTROL.finditer(text)})


def assert_text_only(text: str, where: str) -> None:
    found = control_in(text)
    assert not found, f"{where}: control reached the display: {found}"
    # the payload, if there at all, is shown escaped (as text, or a JSON escape)
    assert OSC52_PAYLOAD not in text or "\\x1b]52" in text or "\\u001b]52" in text, where


def _diff() -> str:
    return ("--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n"
            f"-old = 1\n+new = '{EVIL}'\n \tkept\n")


def write_hostile_project(root: Path, *, now: float) -> dict[str, Any]:
    """A real `.sdd/` where every displayed field holds the corpus; returns what it wrote."""
    init_project(root)
    sdd = root / ".sdd"
    log = sdd / "runtime" / "agent-evil.log"
    log.write_bytes(("agent says hi \x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[0m\n"
                     + "\n".join(f"{name}: {value}" for name, value in HOSTILE.items())
                     + "\n").encode("utf-8", errors="surrogatepass"))
    chain = [{"model": f"haiku{EVIL}", "attempt_number": 1, "success": False,
              "effort": EVIL, "kind": EVIL, "cost_usd": EVIL, "latency_s": "[/]",
              "tokens_used": EVIL, "escalated": True, "escalation_reason": EVIL}]
    append(sdd / "runtime" / "tasks.jsonl",
           task_record(TASK_ID, "failed", title=LONG_TITLE, role=f"qa{EVIL}",
                       description=EVIL, model=f"opus{EVIL}", deadline=now - 5,
                       created_at=now - 600,
                       metadata={"log": str(log.relative_to(root)), "chain": chain,
                                 "tier": EVIL, "tier_reason": EVIL}),
           task_record(MARKUP_ID, "failed", title=f"markup {HOSTILE['markup_close']}",
                       role="[bold]", deadline=now + 300, created_at=now - 60),
           task_record("T-state", f"weird{EVIL}", title=EVIL, role="docs"),
           task_record("T-surrogate", "open", title="lone \ud800 surrogate \U000e0041"),
           '{"id": "T-bad", "status": "open", "title": 5}\n',  # a problem whose reason is shown
           f'{{"id": "{json.dumps(EVIL)[1:-1]}", "title": 7}}\n')
    for task_id in (TASK_ID, MARKUP_ID):
        append(sdd / "metrics" / "quality_gates.jsonl",
               {"task_id": task_id, "gate": f"lint{EVIL}", "status": "fail",
                "result": "blocked", "duration_ms": 12, "required": True})
    (sdd / "runtime" / "gates" / "T-evil.json").write_text(json.dumps({
        "task_id": TASK_ID, "overall_pass": False, "total_duration_ms": 5,
        "changed_files": [EVIL], "cache_hits": 0,
        "results": [{"name": f"tests{EVIL}", "status": "fail", "required": True,
                     "blocked": True, "duration_ms": 5, "details": EVIL,
                     "digest": f"src/a.py:1: {EVIL}\n{EVIL}"}]}))
    append(sdd / "metrics" / "cascade_chains.jsonl", {
        "chain_id": f"ch{EVIL}", "task_id": TASK_ID, "role": EVIL, "final_model": EVIL,
        "succeeded": False, "total_cost_usd": 0.5, "timestamp": now - 20,
        "attempts": [{"model": f"haiku{EVIL}", "attempt_number": 1, "success": False,
                      "cost_usd": 0.1, "escalated": True, "escalation_reason": EVIL},
                     {"model": EVIL, "attempt_number": 2, "success": False,
                      "cost_usd": 0.4}]})
    append(sdd / "metrics" / "reflections.jsonl", {
        "task_id": TASK_ID, "iteration": 1, "model": EVIL, "gate": EVIL,
        "error_pattern": EVIL, "source": "rules", "digest": f"src/{EVIL}.py:3: boom",
        "files_changed": [EVIL], "diagnosis": {"what_failed": EVIL, "why": EVIL,
                                               "try_next": EVIL, "focus": EVIL}})
    append(sdd / "metrics" / "reviews.jsonl", {
        "task_id": TASK_ID, "global_score": 2.0, "threshold": 3.0, "passed": False,
        "merged": {EVIL: 2.0}, "scores": [{"judge": EVIL, "dimension": EVIL, "score": 2,
                                           "reasoning": EVIL}]})
    append(sdd / "metrics" / "sla_events.jsonl",
           {"event": "sla:violated", "entity_id": TASK_ID, "entity_type": EVIL},
           {"event": "sla:warning", "entity_id": MARKUP_ID, "entity_type": "task"})
    append(sdd / "metrics" / "tasks.jsonl",
           {"task_id": TASK_ID, "role": EVIL, "model": EVIL, "duration_seconds": 3.0})
    append(sdd / "evolution" / "deferred.jsonl", {
        "proposal_id": f"EVO-{EVIL}", "title": LONG_TITLE, "category": EVIL,
        "description": EVIL, "confidence": 0.5, "reason": EVIL, "risk_level": EVIL,
        "target_files": [EVIL], "diff": _diff()},
        {"proposal_id": "EVO-[/]", "title": "[/]", "category": "c", "description": "d",
         "confidence": 0.4, "reason": "r", "risk_level": "L2", "diff": _diff()})
    append(sdd / "runtime" / "engine_events.jsonl",
           {"level": "error", "message": EVIL, "task_id": TASK_ID, "file": EVIL})
    (sdd / "runtime" / "engine_status.json").write_text(json.dumps({
        "pid": 1, "workers": 2, "busy": 1, "paused": False, "running": True,
        "base": f"main{EVIL}", "updated_at": now}))
    return {"log": log}
