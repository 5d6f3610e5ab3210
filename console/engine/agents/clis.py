"""The claude, codex and gemini CLIs as installed today: how each is started for one
non-interactive attempt, per version range where its flags changed, what it needs in
`agents.env`, and how it says it is not logged in.

Each CLI runs in its JSON / stream-JSON mode (engine/agents/transcript.py reads it),
with a sandbox that may write the worktree, no trust prompt, the model (and effort,
where the CLI takes one) in its own terms, and permissions that work as root (in
containers and CI agents run as root; claude refuses --dangerously-skip-permissions
there). The installed version is read once per binary (`--version`); a version newer
than every row gets the newest row, and if it fails the CLI's own message is reported.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Version = tuple[int, int, int]
#: (our effort) → codex's model_reasoning_effort
CODEX_EFFORT = {"low": "low", "medium": "medium", "normal": "medium", "high": "high",
                "max": "xhigh"}
#: claude's --effort levels (since 2.1)
CLAUDE_EFFORT = {"low": "low", "medium": "medium", "normal": "medium", "high": "high",
                 "max": "max"}
#: tools claude may use without asking (its permission mode only accepts edits; the
#: agent must also run the project's tests)
CLAUDE_TOOLS = "Bash Edit MultiEdit Write Read Glob Grep LS NotebookEdit TodoWrite"
VERSION_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Launch:
    argv: tuple[str, ...]  # after the binary
    env: Mapping[str, str]  # added to the scrubbed environment


Builder = Callable[[str, str, str], Launch]  # (prompt, model, effort) → launch


def _claude(prompt: str, model: str, effort: str, with_effort: bool) -> Launch:
    argv = ["-p", prompt, "--output-format", "stream-json", "--verbose", "--model", model,
            "--permission-mode", "acceptEdits", "--allowedTools", CLAUDE_TOOLS]
    if with_effort and effort in CLAUDE_EFFORT:
        argv += ["--effort", CLAUDE_EFFORT[effort]]
    return Launch(tuple(argv), {})


def _codex(prompt: str, model: str, effort: str, sandbox_flag: bool) -> Launch:
    argv = ["exec", "--json", "--skip-git-repo-check", "-m", model]
    # 0.169 removed --full-auto; without a sandbox flag exec is read-only and exits 0
    # having written nothing
    argv += ["--sandbox", "workspace-write"] if sandbox_flag else ["--full-auto"]
    if effort in CODEX_EFFORT:
        argv += ["-c", f'model_reasoning_effort="{CODEX_EFFORT[effort]}"']
    return Launch((*argv, prompt), {})


def _gemini(prompt: str, model: str, effort: str, skip_trust: bool) -> Launch:
    argv = ["-p", prompt, "-m", model, "-o", "stream-json", "--yolo"]
    if skip_trust:  # folder trust overrides --yolo (exit 55 in every fresh worktree)
        argv.append("--skip-trust")
    return Launch(tuple(argv), {"GEMINI_CLI_TRUST_WORKSPACE": "true"})


#: per CLI, (first version, how it is started), oldest first
FLAGS: Mapping[str, tuple[tuple[Version, Builder], ...]] = {
    "claude": (((1, 0, 0), lambda p, m, e: _claude(p, m, e, with_effort=False)),
               ((2, 1, 0), lambda p, m, e: _claude(p, m, e, with_effort=True))),
    "codex": (((0, 1, 0), lambda p, m, e: _codex(p, m, e, sandbox_flag=False)),
              ((0, 169, 0), lambda p, m, e: _codex(p, m, e, sandbox_flag=True))),
    "gemini": (((0, 1, 0), lambda p, m, e: _gemini(p, m, e, skip_trust=False)),
               ((0, 61, 0), lambda p, m, e: _gemini(p, m, e, skip_trust=True))),
}
#: the versions the contract tests ran (tests/test_real_clis.py)
TESTED = {"claude": (2, 1, 197), "codex": (0, 169, 0), "gemini": (0, 61, 0)}

#: what each CLI needs in `agents.env` (passed through the scrubbed environment)
CREDENTIALS: Mapping[str, tuple[str, ...]] = {
    "claude": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"),
    # codex 0.169 reads no base-URL variable: another endpoint is a provider in
    # $CODEX_HOME/config.toml
    "codex": ("OPENAI_API_KEY", "CODEX_HOME"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY"),
}

#: how each CLI says it has no credentials (case-insensitive)
_NOT_LOGGED_IN = re.compile(
    r"not logged in|please run /login|invalid api key|authentication_error|"
    r"missing (environment variable|api key)|no api key|401 unauthorized|"
    r"OPENAI_API_KEY|GEMINI_API_KEY environment variable|auth method", re.IGNORECASE)

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_versions: dict[tuple[str, float], Version | None] = {}


def installed_version(binary: str, env: Mapping[str, str]) -> Version | None:
    """`binary --version`, read once per binary file (None when it says nothing usable)."""
    try:
        key = (binary, os.stat(binary).st_mtime)
    except OSError:
        return None
    if key not in _versions:
        try:
            out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=VERSION_TIMEOUT_S, env=dict(env),
                                 stdin=subprocess.DEVNULL)
            found = _VERSION.search(out.stdout + out.stderr)
        except (OSError, subprocess.SubprocessError):
            found = None
        _versions[key] = tuple(int(g) for g in found.groups()) if found else None  # type: ignore[assignment]  # three groups: a Version
    return _versions[key]


def launch(adapter: str, version: Version | None, prompt: str, model: str,
           effort: str) -> Launch:
    """How `adapter` at `version` is started (unknown or newer: the newest row)."""
    rows = FLAGS[adapter]
    chosen = rows[-1][1]
    if version is not None:
        for since, builder in rows:
            if version >= since:
                chosen = builder
    return chosen(prompt, model, effort)


def _needs(adapter: str, why: str) -> str:
    needs = " or ".join(CREDENTIALS.get(adapter, ())[:1]) or "its credentials"
    return (f"adapter {adapter} is not logged in ({why[:160]}); list {needs} under "
            "agents.env in bernstein.yaml and set it in the engine's environment")


def missing_login(adapter: str, env: Mapping[str, str]) -> str | None:
    """Before starting it: a CLI that has no credentials at all and would not say so.
    codex without a key, a login or a config of its own retries the network until the
    attempt's timeout; claude and gemini say it at once (not_logged_in reads them)."""
    if adapter != "codex" or any(env.get(k) for k in (
            "OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN")):
        return None
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", "~"), ".codex")
    if any(os.path.exists(os.path.join(home, name)) for name in ("auth.json", "config.toml")):
        return None  # a login, or a provider that may bring its own key
    return _needs(adapter, f"no OPENAI_API_KEY, and no auth.json or config.toml in {home}")


def not_logged_in(adapter: str, text: str) -> str | None:
    """A one-line error when the CLI's words say it has no credentials."""
    for line in text.splitlines():
        if _NOT_LOGGED_IN.search(line):
            return _needs(adapter, line.strip())
    return None
