"""The janitor: a task's completion signals checked in the attempt's worktree.

Every path is confined to the worktree: `..`, absolute paths outside it and
symlinks leading out fail with the reason. `llm_review` and `llm_judge` go
through the one LLM client; with none configured they fail with "not
configured" — never a made-up verdict.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import regex  # type: ignore[import-untyped]  # the regex package ships no stubs

from console.engine.agents.process import AgentCommand, run_agent
from console.engine.gates.base import tool_environ
from console.engine.llm import LlmClient, LlmUnavailable
from console.engine.safegit import GitFailed, child_env
from console.model import CompletionSignal
from console.sdd.confine import UnsafePath, resolve_inside

MAX_READ_BYTES = 8 * 1024 * 1024
REGEX_TIME_LIMIT_S = 2.0  # for one file_contains pattern over the whole file
MAX_LINES = 20000
MAX_LINE_CHARS = 4096
MAX_GLOB_STARS = 2
MAX_GLOB_MATCHES = 10000
API_TIMEOUT_S = 10.0  # api_responds: connect, each read and write


@dataclass(frozen=True, slots=True)
class SignalResult:
    signal: CompletionSignal
    passed: bool
    detail: str
    flagged: str = ""  # why a human should look (a judge that was not sure): review queue

    def __str__(self) -> str:
        mark = "✓" if self.passed else "✗"
        return f"{mark} {self.signal.type} {self.signal.value}: {self.detail}"


class Confinement(ValueError):
    pass


class PatternRefused(ValueError):
    """A pattern from a ticket that is invalid, ran out of time, or could not finish in
    reasonable time (a glob of many '**'): the message says which."""


def confine(worktree: Path, relative: str) -> Path:
    """The path inside the worktree (links resolved), or Confinement naming why it escapes
    (the rule is the one confinement module's)."""
    try:
        return resolve_inside(worktree, relative)
    except UnsafePath as exc:
        raise Confinement(str(exc)) from None


def contains(text: str, needle: str, *, time_limit_s: float = REGEX_TIME_LIMIT_S) -> bool:
    """Bernstein's substring test; `/pattern/` asks for a regular expression (seed 000),
    searched line by line under one time limit for the whole file (the `regex` engine
    checks it while backtracking), so no pattern from a ticket can stall the engine.
    Raises PatternRefused with the reason: a bad pattern, or one that ran out of time."""
    if not (len(needle) > 2 and needle.startswith("/") and needle.endswith("/")):
        return needle in text
    try:
        pattern = regex.compile(needle[1:-1], flags=regex.VERSION0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise PatternRefused("the pattern is not a valid regular expression: "
                           f"{str(exc).splitlines()[0]}") from None
    deadline = time.monotonic() + time_limit_s
    try:
        for line in text.splitlines()[:MAX_LINES]:
            if len(line) <= MAX_LINE_CHARS and pattern.search(
                    line, timeout=max(0.001, deadline - time.monotonic())):
                return True
    except TimeoutError:
        raise PatternRefused(f"the pattern took longer than {time_limit_s:g} s on this file "
                           "(catastrophic backtracking?); not a match") from None
    return False


def answered(url: str, *, timeout_s: float = API_TIMEOUT_S) -> int:
    """The status `url` answers a GET with. The URL is data: a redirect is an answer
    like any other (never followed), no proxy, .netrc or other setting comes from the
    environment (`trust_env=False`: no credentials of the operator's ride along), and the
    body is never read."""
    with httpx.Client(follow_redirects=False, trust_env=False,
                      timeout=httpx.Timeout(timeout_s)) as client, \
            client.stream("GET", url) as response:
        return response.status_code


JUDGE_CONFIDENCE_THRESHOLD = 0.7  # seed 000 (janitor.py:36-44)
FLAGGED = "flagged for human review)"


class Janitor:
    def __init__(self, llm: LlmClient, *, test_timeout_s: float = 120.0,
                 env: dict[str, str] | None = None) -> None:
        self.llm = llm
        self.test_timeout_s = test_timeout_s
        self.env = tool_environ() if env is None else env  # test_passes: project code

    def check(self, signals: tuple[CompletionSignal, ...], worktree: Path, *, task_title: str,
              log_path: Path, diff: str = "", cancel: threading.Event | None = None
              ) -> list[SignalResult]:
        """Each signal's verdict; test_passes output is appended to `log_path`."""
        results: list[SignalResult] = []
        for signal in signals:
            if signal.type == "llm_judge" and any(not r.passed for r in results):
                results.append(SignalResult(signal, False, "skipped: other signals failed"))
                continue
            try:
                passed, detail = self._one(signal, worktree, task_title, diff, cancel, log_path)
            except (Confinement, PatternRefused) as exc:
                passed, detail = False, str(exc)
            except Exception as exc:  # a malformed signal fails itself, not the attempt
                passed, detail = False, f"cannot check: {type(exc).__name__}: {exc}"
            flagged = detail if passed and detail.endswith(FLAGGED) else ""
            results.append(SignalResult(signal, passed, detail, flagged))
        return results

    def _one(self, signal: CompletionSignal, worktree: Path, title: str, diff: str,
             cancel: threading.Event | None, log_path: Path) -> tuple[bool, str]:
        kind, value = signal.type, signal.value
        if kind == "path_exists":
            path = confine(worktree, value)
            return path.exists(), "exists" if path.exists() else "does not exist"
        if kind == "glob_exists":
            if Path(value).is_absolute() or ".." in Path(value).parts:
                raise Confinement(f"glob {value!r} reaches outside the worktree")
            if Path(value).parts.count("**") > MAX_GLOB_STARS:  # each one walks the tree again
                raise PatternRefused(f"glob {value!r} has more than {MAX_GLOB_STARS} '**' parts")
            root = worktree.resolve()
            matches = [p for p in itertools.islice(worktree.glob(value), MAX_GLOB_MATCHES)
                       if p.resolve().is_relative_to(root)]
            return bool(matches), f"{len(matches)} match(es)"
        if kind == "file_contains":
            rel, _, needle = value.partition(" :: ")
            path = confine(worktree, rel.strip())
            if not path.is_file():
                return False, f"{rel.strip()} does not exist"
            with open(path, "rb") as handle:
                text = handle.read(MAX_READ_BYTES).decode("utf-8", errors="replace")
            found = contains(text, needle)
            return found, "found" if found else f"{needle!r} not found in {rel.strip()}"
        if kind == "test_passes":
            return self._test(value, worktree, cancel, log_path)
        if kind == "api_responds":
            expected = signal.expected_status or 200
            try:
                status = answered(value)
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                return False, f"request failed: {type(exc).__name__}"
            return status == expected, f"answered {status}, expected {expected}"
        if kind in ("llm_review", "llm_judge"):
            return self._llm(kind, value, title, diff)
        return False, f"unknown signal type {kind}"

    def _test(self, command: str, worktree: Path, cancel: threading.Event | None,
              log_path: Path) -> tuple[bool, str]:
        try:  # the project's tests may run git: none of the repository's programs
            env = child_env(self.env, worktree)
        except GitFailed as exc:
            return False, exc.line
        result = run_agent(AgentCommand(("/bin/sh", "-c", command), b"", env), worktree,
                           timeout_s=self.test_timeout_s, log_path=log_path,
                           cap_bytes=1024 * 1024,
                           cancel=cancel or threading.Event(), kill_grace_s=1.0)
        if result.timed_out:
            return False, f"timed out after {self.test_timeout_s:.0f} s"
        last = result.output_tail.strip().splitlines()[-1:] or [""]
        if result.exit_code == 0:
            return True, "exit 0"
        return False, f"exit {result.exit_code}: {last[0][:160]}"

    def _llm(self, kind: str, instruction: str, title: str, diff: str) -> tuple[bool, str]:
        if not self.llm.configured:
            return False, f"not configured: {self.llm.not_configured_reason()}"
        system = ("You verify whether a coding agent's change satisfies a requirement. "
                  + ("Answer with PASS or FAIL on the first line, then one line why."
                     if kind == "llm_review" else
                     'Answer with JSON: {"verdict": "accept"|"retry", "confidence": 0..1, '
                     '"feedback": "..."}'))
        user = f"Task: {title}\nRequirement: {instruction}\n\nDiff:\n{diff[:12000]}"
        try:
            reply = self.llm.chat(system, user, max_tokens=256, purpose=kind)
        except LlmUnavailable as exc:
            return False, str(exc)
        text = reply.text.strip()
        if kind == "llm_review":
            first = text.splitlines()[0].strip().upper() if text else ""
            return first.startswith("PASS"), text[:200] or "empty answer"
        try:
            verdict = json.loads(text[text.find("{"): text.rfind("}") + 1])
            accepted = verdict.get("verdict") == "accept"
            said = str(verdict.get("feedback", ""))[:200] or str(verdict.get("verdict", ""))
            sure = verdict.get("confidence")
            if accepted and isinstance(sure, int | float) and sure < JUDGE_CONFIDENCE_THRESHOLD:
                # seed 000: below the threshold the verdict stands, and a human looks
                return True, f"{said} (confidence {sure:.2f} < {JUDGE_CONFIDENCE_THRESHOLD}: " \
                    f"{FLAGGED}"
            return accepted, said
        except (ValueError, AttributeError):
            return False, f"judge answered no verdict: {text[:160]}"
