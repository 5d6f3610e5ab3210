"""Judge confidence (#20.6, seed 000): an llm_judge that accepts with confidence below 0.7
still passes, and the task goes to the operator's review queue (a warning in the event
log and run output, a line in metrics/review_queue.jsonl); a sure judge adds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.engine_kit import make_repo, tasks, ticket
from tests.llm_server import llm_server

NO_GATES = "quality_gates:\n  enabled: false\n"


def test_an_unsure_judge_passes_and_queues_the_task_for_review(tmp_path: Path) -> None:
    def answer(body: dict, number: int) -> tuple[int, str]:
        sure = 0.95 if "Task: SURE" in body["messages"][1]["content"] else 0.55
        return 200, json.dumps({"verdict": "accept", "confidence": sure, "feedback": "looks ok"})

    with llm_server(answer) as (url, _seen):
        root = make_repo(tmp_path, config=NO_GATES + f"llm: {{base_url: '{url}'}}\n")
        for name in ("UNSURE", "SURE"):
            ticket(root, name.lower(), id=name, title=f"{name} change",
                   description=f"write {name.lower()}.txt done",
                   completion_signals=[{"type": "llm_judge", "value": "the file is written"}])
        result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                                 "--until-idle"], capture_output=True, text=True, timeout=600,
                                env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    state = tasks(root)
    assert state["UNSURE"].status == "done" and state["SURE"].status == "done"
    queue = [json.loads(x) for x in
             (root / ".sdd/metrics/review_queue.jsonl").read_text().splitlines()]
    assert [(q["task_id"], q["source"]) for q in queue] == [("UNSURE", "llm_judge")]
    assert queue[0]["detail"] == "looks ok (confidence 0.55 < 0.7: flagged for human review)"
    assert "UNSURE: llm_judge looks ok (confidence 0.55 < 0.7: flagged for human review)" in \
        result.stdout
    events = (root / ".sdd/runtime/engine_events.jsonl").read_text()
    assert "flagged for human review" in events and "SURE: llm_judge" not in \
        events.replace("UNSURE: llm_judge", "")
