"""`bernstein.yaml`: the run configuration, typed. Unknown keys are reported, not fatal.

Only the sections the engine uses so far are typed here; every key Bernstein
itself reads is accepted silently, anything else becomes a warning that names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.model import Problem
from console.sdd.fields import RecordError, float_or, int_or, opt_float, opt_str, str_tuple
from console.sdd.fileio import read_regular_file
from console.sdd.server_signals import ServerSignalPolicy, parse_server_signals

#: top-level keys Bernstein's seed parser reads (accepted, mostly unused by us yet)
BERNSTEIN_KEYS = frozenset({
    "goal", "cli", "team", "budget", "max_agents", "model", "effort", "quality_gates",
    "constraints", "context_files", "roles", "max_cost_per_agent", "approval", "sandbox",
    "notify", "webhooks", "evolution", "missions", "sla", "cascade", "routing", "providers",
    "agents", "llm", "storage", "workflow", "plan", "tenants", "mcp_servers", "review",
})
OUR_KEYS = frozenset({"base_branch", "workers", "roles_dir", "janitor", "complexity",
                      "cluster"})
DEFAULT_TIMEOUTS = {"small": 900.0, "medium": 1800.0, "large": 3600.0}
DEFAULT_ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "TZ",
                     "USER", "LOGNAME", "SHELL", "VIRTUAL_ENV", "PYTHONPATH")


class ConfigError(ValueError):
    """bernstein.yaml cannot be used: the message names the key."""


@dataclass(frozen=True, slots=True)
class AgentsConfig:
    default: str = "auto"
    commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # script/generic argv
    env: tuple[str, ...] = ()  # extra variables passed through to agents
    timeouts: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))
    log_cap_bytes: int = 5 * 1024 * 1024
    kill_grace_s: float = 3.0


@dataclass(frozen=True, slots=True)
class LlmConfig:
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    model: str = "gpt-4o-mini"
    timeout_s: float = 60.0
    max_retries: int = 2
    budget_usd: float | None = None  # per run; past it LLM calls stop (and say so)
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # $ per 1M tokens

    @property
    def configured(self) -> bool:
        return bool(self.base_url)


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    base_branch: str | None = None
    workers: int | None = None
    roles_dir: str = "templates/roles"
    test_timeout_s: float = 120.0
    #: `cluster.server_signals`: what a task server's signals may run on a worker (only
    #: honoured in a trusted project; the worker checks)
    server_signals: ServerSignalPolicy = field(default_factory=ServerSignalPolicy)
    raw: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[Problem, ...] = ()


def _section(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a map, got {type(value).__name__}")
    return value


def _argv(value: object, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        return tuple(shlex.split(value))
    if isinstance(value, list) and value and all(isinstance(v, str | int) for v in value):
        return tuple(str(v) for v in value)
    raise ConfigError(f"'{key}' must be a command (a string or a list of strings)")


def _prices(raw: object, key: str) -> dict[str, tuple[float, float]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"'{key}' must be a map of model → [input, output] $ per 1M tokens")
    out = {}
    for model, pair in raw.items():
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, int | float) for x in pair)):
            raise ConfigError(f"'{key}.{model}' must be [input, output] $ per 1M tokens")
        out[str(model)] = (float(pair[0]), float(pair[1]))
    return out


def _cluster(raw: object) -> tuple[ServerSignalPolicy, list[str]]:
    """`cluster:` (a worker's settings): a bad value is a problem, never fatal; it allows
    nothing."""
    if raw is None:
        return ServerSignalPolicy(), []
    if not isinstance(raw, dict):
        return ServerSignalPolicy(), ["'cluster' must be a map (ignored)"]
    unknown = [f"unknown key 'cluster.{key}' (ignored)" for key in raw
               if key != "server_signals"]
    policy, problems = parse_server_signals(raw.get("server_signals"))
    return policy, unknown + problems


def parse_config(raw: Mapping[str, Any], display: str = "bernstein.yaml") -> ProjectConfig:
    warnings = [Problem(display, None, f"unknown key '{key}' (ignored)")
                for key in raw if key not in BERNSTEIN_KEYS | OUR_KEYS]
    try:
        agents_raw = _section(raw, "agents")
        commands = {}
        for name in ("script", "generic"):
            section = agents_raw.get(name)
            if section is None:
                continue
            if not isinstance(section, dict) or "command" not in section:
                raise ConfigError(f"'agents.{name}' needs a 'command'")
            commands[name] = _argv(section["command"], f"agents.{name}.command")
        timeouts = dict(DEFAULT_TIMEOUTS)
        for scope, seconds in _section(agents_raw, "timeouts").items():
            timeouts[str(scope)] = float_or({"t": seconds}, "t", DEFAULT_TIMEOUTS["medium"])
        agents = AgentsConfig(
            default=str(agents_raw.get("default") or raw.get("cli") or "auto"),
            commands=commands,
            env=str_tuple(agents_raw, "env"),
            timeouts=timeouts,
            log_cap_bytes=int_or(agents_raw, "log_cap_bytes", 5 * 1024 * 1024),
            kill_grace_s=float_or(agents_raw, "kill_grace_s", 3.0),
        )
        llm_raw = _section(raw, "llm")
        llm = LlmConfig(
            base_url=opt_str(llm_raw, "base_url"),
            api_key_env=opt_str(llm_raw, "api_key_env") or "OPENAI_API_KEY",
            model=opt_str(llm_raw, "model") or "gpt-4o-mini",
            timeout_s=float_or(llm_raw, "timeout_s", 60.0),
            max_retries=int_or(llm_raw, "max_retries", 2),
            budget_usd=opt_float(llm_raw, "budget_usd"),
            prices=_prices(llm_raw.get("prices"), "llm.prices"),
        )
        janitor = _section(raw, "janitor")
        server_signals, problems = _cluster(raw.get("cluster"))
        warnings += [Problem(display, None, problem) for problem in problems]
        workers = int_or(raw, "workers", 0) or None
        return ProjectConfig(
            agents=agents, llm=llm, base_branch=opt_str(raw, "base_branch"), workers=workers,
            roles_dir=opt_str(raw, "roles_dir") or "templates/roles",
            test_timeout_s=float_or(janitor, "test_timeout_s", 120.0),
            server_signals=server_signals, raw=raw, warnings=tuple(warnings),
        )
    except RecordError as exc:
        raise ConfigError(str(exc)) from None


def load_config(root: Path) -> ProjectConfig:
    """Read root/bernstein.yaml (missing = defaults). Raises ConfigError with the reason."""
    path = root / "bernstein.yaml"
    data, problem = read_regular_file(path, "bernstein.yaml", 1024 * 1024)
    if problem is not None:
        raise ConfigError(f"bernstein.yaml {problem.reason}")
    if data is None:
        return ProjectConfig()
    try:
        import yaml  # here, not at start-up: most runs of the console never read it

        from console.sdd.safe_yaml import YamlLimitError, load_yaml

        raw = load_yaml(data.decode("utf-8"))
    except YamlLimitError as exc:
        raise ConfigError(f"bernstein.yaml refused: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"bernstein.yaml is not valid YAML: {str(exc).splitlines()[0]}") from None
    if raw is None:
        return ProjectConfig()
    if not isinstance(raw, dict):
        raise ConfigError("bernstein.yaml must be a YAML map")
    return parse_config(raw)
