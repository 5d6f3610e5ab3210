"""The reflection loop and iteration memory (seed 002).

A failed iteration's digest becomes a diagnosis in four sections — what failed,
why, what to try differently, which files and functions to focus on — from the
LLM when one is configured (in a worker thread: the next attempt does not wait
for it), otherwise from rules that read ruff codes, mypy error kinds, pytest
assertions and import errors, and say they are rules. The same first error at
the same place reuses the stored reflection. Reflections go to
metrics/reflections.jsonl; the next attempt's prompt carries them, iteration by
iteration, with the files each attempt changed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from console.engine.llm import LlmClient, LlmUnavailable
from console.sdd.fileio import append_jsonl
from console.sdd.paths import Kind, SddPaths

MAX_DIGEST_CHARS = 8000

RUFF_ADVICE = {
    "F401": ("an import is unused", "remove the unused import (or use it)"),
    "F811": ("a name is defined twice", "remove or rename the duplicate definition"),
    "F821": ("a name is used but never defined or imported",
             "import or define the name before using it"),
    "F841": ("a local variable is assigned but never used", "remove the assignment or use it"),
    "E501": ("a line is longer than the configured limit", "wrap the long line"),
    "E302": ("blank lines around a definition are missing", "format the file (ruff format)"),
    "I001": ("imports are not sorted", "sort the imports (ruff check --fix)"),
    "B006": ("a mutable default argument", "default to None and create the value inside"),
}
MYPY_ADVICE = {
    "return-value": ("a function returns a value of the wrong type",
                     "return the declared type, or fix the annotation"),
    "arg-type": ("a call passes an argument of the wrong type",
                 "convert the argument or change the callee's annotation"),
    "attr-defined": ("an attribute is used that the type does not have",
                     "check the object's type and the attribute's name"),
    "name-defined": ("a name is not defined", "import or define it"),
    "import": ("a module cannot be found", "add the dependency or fix the import path"),
    "assignment": ("a value of the wrong type is assigned", "fix the value or the annotation"),
}
_LOCATION = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+)")
_CODE = re.compile(r"\b([A-Z]{1,3}\d{3,4})\b")
_MYPY_KIND = re.compile(r"\[([a-z-]+)\]\s*$")
_ASSERT = re.compile(r"assert (?P<left>.+?) == (?P<right>.+)$")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    what_failed: str
    why: str
    try_next: str
    focus: str

    def render(self) -> str:
        return (f"## What failed\n{self.what_failed}\n\n## Why it failed\n{self.why}\n\n"
                f"## What to try differently\n{self.try_next}\n\n"
                f"## Files/functions to focus on\n{self.focus}")


_GATE_PREFIX = re.compile(r"^\[[a-z_,]+\]\s*")


def error_pattern(digest: str) -> str:
    """The first error line with its location: what dedupe compares (not the digest's
    header, nor a banner line before the first located error)."""
    lines = [_GATE_PREFIX.sub("", line).strip() for line in digest.splitlines()]
    lines = [line for line in lines if line and "unique error(s)" not in line]
    located = next((line for line in lines if _LOCATION.match(line)), None)
    return (located or (lines[0] if lines else ""))[:300]


def rule_diagnosis(gate: str, digest: str) -> Diagnosis:
    """A deterministic reading of the digest; it says it is rule-based."""
    lines = [line.strip() for line in digest.splitlines() if line.strip()]
    errors = [line for line in lines if _LOCATION.match(line) or "failed" in line]
    locations = sorted({m.group("file") + ":" + m.group("line")
                        for line in errors if (m := _LOCATION.match(line))})
    whys: list[str] = []
    tries: list[str] = []
    for line in errors[:10]:
        code = _CODE.search(line)
        kind = _MYPY_KIND.search(line)
        assertion = _ASSERT.search(line)
        if code and code.group(1) in RUFF_ADVICE:
            why, fix = RUFF_ADVICE[code.group(1)]
            whys.append(f"{code.group(1)}: {why}")
            tries.append(fix)
        elif kind and kind.group(1) in MYPY_ADVICE:
            why, fix = MYPY_ADVICE[kind.group(1)]
            whys.append(f"[{kind.group(1)}]: {why}")
            tries.append(fix)
        elif assertion:
            whys.append(f"a test expected {assertion.group('right').strip()} but got "
                        f"{assertion.group('left').strip()}")
            tries.append("fix the code under test so it returns the expected value "
                         "(not the test)")
        elif "ModuleNotFoundError" in line or "ImportError" in line:
            whys.append("a module could not be imported")
            tries.append("check the module path, the package layout and the dependencies")
    if not whys:
        whys.append(f"the {gate} step reported errors the rules do not recognise")
        tries.append("read the digest line by line and fix each error at its location")
    first = errors[0] if errors else (lines[0] if lines else f"{gate} failed")
    return Diagnosis(
        what_failed=f"{gate} failed: {first}" + (f" (+{len(errors) - 1} more)"
                                                  if len(errors) > 1 else ""),
        why="; ".join(dict.fromkeys(whys)) + " [rule-based analysis: no LLM configured]",
        try_next="; ".join(dict.fromkeys(tries)),
        focus=", ".join(locations[:8]) or "the files changed in this attempt",
    )


_SECTION = re.compile(r"^#+\s*(what failed|why it failed|what to try differently|"
                      r"files/functions to focus on)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_llm_diagnosis(text: str) -> Diagnosis | None:
    parts = _SECTION.split(text)
    sections: dict[str, str] = {}
    for index in range(1, len(parts) - 1, 2):
        sections[parts[index].lower()] = parts[index + 1].strip()
    if len(sections) < 4:
        return None
    return Diagnosis(sections["what failed"], sections["why it failed"],
                     sections["what to try differently"],
                     sections["files/functions to focus on"])


SYSTEM = ("You diagnose why a coding agent's change failed an automated check. Answer in "
          "Markdown with exactly four sections: '## What failed', '## Why it failed', "
          "'## What to try differently', '## Files/functions to focus on'. Be concrete.")


class Reflector:
    """Produces, stores and recalls reflections for one project."""

    def __init__(self, paths: SddPaths, llm: LlmClient,
                 on_note: Callable[[str], object] | None = None) -> None:
        self.paths = paths
        self.llm = llm
        self.on_note = on_note or (lambda message: None)
        self._lock = threading.Lock()
        self._by_task: dict[str, list[dict]] = {}
        self._pending: dict[str, threading.Thread] = {}

    def remember(self, records: list[dict]) -> None:
        """Load stored reflections (e.g. after a restart) into the memory."""
        with self._lock:
            for record in records:
                self._by_task.setdefault(str(record.get("task_id")), []).append(record)

    def for_task(self, task_id: str) -> list[dict]:
        with self._lock:
            return list(self._by_task.get(task_id, []))

    def _store(self, record: dict) -> None:
        append_jsonl(self.paths.of(Kind.REFLECTIONS), [record])
        with self._lock:
            self._by_task.setdefault(record["task_id"], []).append(record)

    def reflect(self, *, task_id: str, iteration: int, model: str, gate: str, digest: str,
                files_changed: list[str]) -> None:
        """Record a reflection for a failed iteration: reused, rule-based now, or LLM later."""
        digest = digest[:MAX_DIGEST_CHARS]
        pattern = error_pattern(digest)
        base = {"timestamp": time.time(), "task_id": task_id, "iteration": iteration,
                "model": model, "gate": gate, "error_pattern": pattern, "digest": digest,
                "files_changed": files_changed}
        with self._lock:
            earlier = next((r for r in self._by_task.get(task_id, [])
                            if pattern and r.get("error_pattern") == pattern), None)
        if earlier is not None:
            self._store({**base, "diagnosis": earlier["diagnosis"], "reused": True,
                         "source": earlier.get("source", "rules")})
            return
        if not self.llm.configured:
            self._store({**base, "diagnosis": _as_dict(rule_diagnosis(gate, digest)),
                         "reused": False, "source": "rules"})
            return
        thread = threading.Thread(target=self._ask, args=(base, gate, digest), daemon=True,
                                  name=f"reflect-{task_id}-{iteration}")
        with self._lock:
            self._pending[task_id] = thread
        thread.start()

    def _ask(self, base: dict, gate: str, digest: str) -> None:
        user = f"The {gate} check failed. Error digest:\n\n{digest}"
        try:
            reply = self.llm.chat(SYSTEM, user, max_tokens=700, purpose="reflection")
            diagnosis = parse_llm_diagnosis(reply.text)
            if diagnosis is None:
                raise LlmUnavailable("the answer did not have the four sections")
            self._store({**base, "diagnosis": _as_dict(diagnosis), "reused": False,
                         "source": "llm", "reflected_by": reply.model})  # model: the attempt's
        except LlmUnavailable as exc:
            self.on_note(f"reflection for {base['task_id']} fell back to rules: {exc}")
            self._store({**base, "diagnosis": _as_dict(rule_diagnosis(gate, digest)),
                         "reused": False, "source": "rules"})
        finally:
            with self._lock:
                self._pending.pop(base["task_id"], None)

    def wait(self, task_id: str, timeout: float) -> None:
        """Give a pending LLM reflection up to `timeout` to land (tests, shutdown)."""
        with self._lock:
            thread = self._pending.get(task_id)
        if thread is not None:
            thread.join(timeout)

    def prompt_section(self, task_id: str, attempts: list[dict]) -> str:
        """'Prior iteration reflections' for the next attempt; the digest alone where the
        reflection is not ready yet."""
        if not attempts:
            return ""
        reflections = {r["iteration"]: r for r in self.for_task(task_id)}
        parts = ["# Prior iteration reflections",
                 "These are analyses of previous failed attempts at this task. Learn from them "
                 "and do not repeat the same mistakes."]
        for attempt in attempts:
            if attempt.get("success"):
                continue
            number = attempt["attempt_number"]
            reflection = reflections.get(number)
            parts.append(f"## Iteration {number} ({attempt['model']}): "
                         f"{attempt.get('escalation_reason') or 'failed'}")
            if reflection is not None:
                d = reflection["diagnosis"]
                parts.append(Diagnosis(d["what_failed"], d["why"], d["try_next"],
                                       d["focus"]).render())
            elif attempt.get("digest"):
                parts.append(f"(reflection not ready yet; the error digest)\n{attempt['digest']}")
            files = ", ".join(attempt.get("files_changed") or []) or "none"
            parts.append(f"Files changed in that attempt: {files}\n---")
        return "\n\n".join(parts)


def _as_dict(diagnosis: Diagnosis) -> dict[str, str]:
    return {"what_failed": diagnosis.what_failed, "why": diagnosis.why,
            "try_next": diagnosis.try_next, "focus": diagnosis.focus}
