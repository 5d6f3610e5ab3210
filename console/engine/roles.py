"""Role templates (seed 001): templates/roles/{role}/ with system_prompt.md,
task_prompt.md ({{TASK_TITLE}}, {{TASK_DESCRIPTION}}, {{FILES}}) and config.yaml
(model, effort, max_tasks_per_session). Built-in defaults cover the seven roles;
any new directory is a custom role.

The engine reads them once, when it starts (RoleBook): they are part of what the
operator trusted (the trust hash's `templates/`), so a template an agent's merged
work changes steers no attempt until the operator trusts the project again and the
engine restarts. A role's name comes from a ticket: it only ever picks one of the
directories read at the start, never builds a path."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from console.model import Task
from console.sdd.confine import UnsafePath, is_safe_id, within
from console.sdd.fileio import read_regular_file
from console.sdd.safe_yaml import load_yaml

ROLE_DEFAULTS = {
    "manager": ("opus", "max", "Goal decomposition, task planning, sprint review."),
    "backend": ("sonnet", "high", "API design, business logic, database work."),
    "frontend": ("sonnet", "high", "UI components, styling, accessibility."),
    "qa": ("sonnet", "high", "Test writing, coverage analysis, regression testing."),
    "security": ("opus", "max", "Threat modelling, vulnerability review, pen-testing scripts."),
    "devops": ("sonnet", "high", "CI/CD, infrastructure, deployment configuration."),
    "docs": ("sonnet", "normal", "Documentation, changelogs, README updates."),
}

DEFAULT_TASK_PROMPT = """\
# Task: {{TASK_TITLE}}

{{TASK_DESCRIPTION}}

Files to focus on:
{{FILES}}

Work in the current directory (a git worktree of the project). Make the change,
keep the tests passing, and exit 0 only when the task is done.
"""


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    system_prompt: str
    task_prompt: str
    model: str
    effort: str
    max_tasks_per_session: int = 1
    source: str = "built-in"
    configured_model: str | None = None  # `model:` in the role's config.yaml: where it starts


def _read(path: Path, display: str) -> str | None:
    data, _problem = read_regular_file(path, display, 256 * 1024)
    return None if data is None else data.decode("utf-8", errors="replace")


def load_role(name: str, roles_dir: Path) -> Role:
    """The role's templates, falling back to built-ins file by file."""
    model, effort, purpose = ROLE_DEFAULTS.get(name, ("sonnet", "high", f"The {name} role."))
    system = f"You are the {name} agent. {purpose}"
    task_prompt = DEFAULT_TASK_PROMPT
    max_tasks = 1
    source = "built-in"
    configured: str | None = None
    directory = roles_dir / name
    if directory.is_dir():
        source = str(directory)
        system = _read(directory / "system_prompt.md", f"{name}/system_prompt.md") or system
        task_prompt = _read(directory / "task_prompt.md", f"{name}/task_prompt.md") or task_prompt
        raw = _read(directory / "config.yaml", f"{name}/config.yaml")
        if raw:
            try:
                config = load_yaml(raw) or {}
            except yaml.YAMLError:
                config = {}
            if isinstance(config, dict):
                configured = str(config.get("model") or config.get("default_model") or "") \
                    or None
                model = configured or model
                effort = str(config.get("effort") or config.get("default_effort") or effort)
                try:
                    max_tasks = int(config.get("max_tasks_per_session", max_tasks))
                except (TypeError, ValueError):
                    max_tasks = 1
    return Role(name, system, task_prompt, model, effort, max_tasks, source, configured)


class RoleBook:
    """The project's role templates as they were when the engine started."""

    def __init__(self, root: Path, relative: str) -> None:
        self.roles: dict[str, Role] = {}
        try:
            roles_dir = within(root, relative, what="roles_dir")
        except (UnsafePath, ValueError):
            return  # a roles_dir leaving the project: the built-in roles only
        if roles_dir.is_symlink() or not roles_dir.is_dir():
            return
        with contextlib.suppress(OSError):
            for entry in sorted(roles_dir.iterdir()):
                if is_safe_id(entry.name) and entry.is_dir() and not entry.is_symlink():
                    self.roles[entry.name] = load_role(entry.name, roles_dir)

    def load(self, name: str) -> Role:
        """The role read at the start, else the built-in (or generic) one."""
        found = self.roles.get(name)
        return found if found is not None else load_role(name, Path(os.devnull))


def available_roles(roles_dir: Path) -> list[str]:
    custom = sorted(p.name for p in roles_dir.iterdir() if p.is_dir()) if roles_dir.is_dir() else []
    return sorted(set(ROLE_DEFAULTS) | set(custom))


def render_prompt(role: Role, task: Task, extra_sections: str = "") -> str:
    files = "\n".join(f"- {f}" for f in task.owned_files) or "- (not specified)"
    body = (role.task_prompt.replace("{{TASK_TITLE}}", task.title)
            .replace("{{TASK_DESCRIPTION}}", task.description or task.title)
            .replace("{{FILES}}", files))
    prompt = f"{role.system_prompt.strip()}\n\n{body.strip()}\n"
    if extra_sections:
        prompt += f"\n{extra_sections.strip()}\n"
    return prompt
