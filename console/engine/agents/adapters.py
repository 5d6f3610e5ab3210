"""Agent adapters: how each agent CLI is started for one attempt.

`script` is the contract the demo and the tests use (DESIGN §4): the argv from
`agents.script.command`, the task as one JSON object on stdin. `generic` fills
`{prompt}` and `{model}` into an argv template. `claude`, `codex` and `gemini`
run in their non-interactive JSON modes with the flags of the installed version
(engine/agents/clis.py) and must be on PATH; a missing one fails the attempt at once
with "adapter X is not installed".
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from console.engine.agents.clis import FLAGS, installed_version, launch, missing_login
from console.engine.agents.process import AgentCommand
from console.engine.errors import AdapterError
from console.model import ADAPTER_LADDERS, Task, family_of
from console.sdd.project_config import AgentsConfig

ADAPTERS = ("script", "generic", "claude", "codex", "gemini")


@dataclass(frozen=True, slots=True)
class AgentContext:
    task: Task
    prompt: str
    model: str
    effort: str
    attempt: int
    worktree: Path
    env: Mapping[str, str]  # scrubbed, including BERNSTEIN_MODEL and BERNSTEIN_TASK_ID


def _which(binary: str, env: Mapping[str, str], adapter: str) -> str:
    found = shutil.which(binary, path=env.get("PATH"))
    if found is None:
        raise AdapterError(f"adapter {adapter} is not installed ({binary} not found on PATH)")
    return found


def _resolve_argv0(argv: tuple[str, ...], ctx: AgentContext, adapter: str) -> tuple[str, ...]:
    head = argv[0]
    if "/" in head:
        path = Path(head) if Path(head).is_absolute() else ctx.worktree / head
        if not path.exists():
            raise AdapterError(f"adapter {adapter}: command {head} does not exist")
        return (str(path), *argv[1:])
    return (_which(head, ctx.env, adapter), *argv[1:])


def task_payload(ctx: AgentContext) -> dict[str, object]:
    """The script contract's stdin object."""
    task = ctx.task
    return {
        "id": task.id, "title": task.title, "description": task.description,
        "role": task.role, "model": ctx.model, "effort": ctx.effort, "attempt": ctx.attempt,
        "prompt": ctx.prompt, "files": list(task.owned_files),
    }


def build_command(adapter: str, ctx: AgentContext, config: AgentsConfig) -> AgentCommand:
    """The process to start, or AdapterError saying why it cannot start."""
    env = dict(ctx.env)
    if adapter == "script":
        argv = config.commands.get("script")
        if not argv:
            raise AdapterError("adapter script is not configured "
                               "(set agents.script.command in bernstein.yaml)")
        stdin = json.dumps(task_payload(ctx)).encode()
        return AgentCommand(_resolve_argv0(argv, ctx, adapter), stdin, env)
    if adapter == "generic":
        template = config.commands.get("generic")
        if not template:
            raise AdapterError("adapter generic is not configured "
                               "(set agents.generic.command in bernstein.yaml)")
        argv = tuple(part.replace("{prompt}", ctx.prompt).replace("{model}", ctx.model)
                     for part in template)
        return AgentCommand(_resolve_argv0(argv, ctx, adapter), b"", env)
    if adapter in FLAGS:
        binary = _which(adapter, env, adapter)
        login = missing_login(adapter, env)
        if login:
            raise AdapterError(login)
        started = launch(adapter, installed_version(binary, env), ctx.prompt, ctx.model,
                         ctx.effort)
        return AgentCommand((binary, *started.argv), b"", {**env, **started.env})
    raise AdapterError(f"unknown adapter '{adapter}' (known: {', '.join(ADAPTERS)})")


def check_model(adapter: str, model: str) -> None:
    """A model meant for another vendor's CLI is refused before it is sent (a ticket
    pinned to `opus` on codex): AdapterError naming the adapter's own ladder."""
    family = family_of(model)
    if adapter in ADAPTER_LADDERS and family is not None and family != adapter:
        raise AdapterError(f"model {model} is a {family} model; adapter {adapter} runs its "
                           f"own ({', '.join(ADAPTER_LADDERS[adapter])}, or any it accepts)")


def choose_adapter(task: Task, config: AgentsConfig, env: Mapping[str, str]) -> str:
    """The task's own `cli`, else the configured default; `auto` picks what is available."""
    wanted = str(task.extra.get("cli") or config.default or "auto")
    return wanted if wanted != "auto" else default_adapter(config, env)


def planned_adapter(task: Task, config: AgentsConfig, env: Mapping[str, str]) -> str:
    """The adapter whose ladder the task is planned on: as choose_adapter, an unusable
    one named as asked (the attempt that starts it says why it cannot run)."""
    try:
        return choose_adapter(task, config, env)
    except AdapterError:
        return str(task.extra.get("cli") or config.default)


def default_adapter(config: AgentsConfig, env: Mapping[str, str]) -> str:
    """`agents.default`, `auto` resolved: a configured script, else the first vendor CLI
    on PATH, else a configured generic command; AdapterError when there is none."""
    if config.default and config.default != "auto":
        return config.default
    if "script" in config.commands:
        return "script"
    for name in ("claude", "codex", "gemini"):
        if shutil.which(name, path=env.get("PATH")):
            return name
    if "generic" in config.commands:
        return "generic"
    raise AdapterError("no agent available: set agents.script.command in bernstein.yaml "
                       "or install claude, codex or gemini")
