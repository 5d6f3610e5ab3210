"""`quality_gates:` in bernstein.yaml (seed 000, reference §6.1), typed and checked.

Bernstein's keys and defaults; a wrong type or an unknown key is a ConfigError
naming it; a gate name Bernstein knows but we do not run yet is refused as
"not supported yet" — never silently ignored. Without `pipeline:`, the default
pipeline is synthesised from the booleans, in seed 000's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.sdd.fields import brief
from console.sdd.gate_registry import BUILT, GATES, NOT_BUILT

CONDITIONS = ("always", "python_changed", "tests_changed", "any_changed", "deps_changed")
LEGACY_CONDITIONS = {"changed_files.any('.py')": "python_changed",
                     'changed_files.any(".py")': "python_changed"}

#: (config flag, gate, required, condition) of the built gates, in pipeline order
DEFAULT_SPECS = tuple((g.flag, g.name, g.required, g.condition) for g in GATES if g.built)
SUPPORTED = BUILT
NOT_YET = NOT_BUILT
DEFAULT_ON = frozenset(g.name for g in GATES if g.default_on)
_NOT_YET_FLAGS = {g.flag: g.name for g in GATES if not g.built}

_BOOLS = {flag for flag, *_ in DEFAULT_SPECS} | {"enabled", "allow_bypass", "cache_enabled",
                                                 "dead_code_check_unused_imports",
                                                 "tests_full_suite", "tests_scope_fallback"}
_STRINGS = {"lint_command", "type_check_command", "type_checker", "test_command", "base_ref",
            "security_scan_command", "coverage_delta_command", "complexity_check_command",
            "dead_code_command", "import_cycle_command", "auto_format_python_command",
            "auto_format_js_command", "auto_format_rust_command", "dep_audit_command",
            "mutation_command", "comment_quality_docstyle"}
_NUMBERS = {"timeout_s", "complexity_threshold", "dead_code_min_confidence",
            "large_file_threshold", "flaky_min_runs", "flaky_threshold", "coverage_tolerance",
            "mutation_threshold", "mutation_timeout_s", "cache_max_entries"}
_LISTS = {"pii_scan_paths", "pii_ignore_paths", "pii_allowlist_prefixes"}
_ACCEPTED = {"flaky_detection", "dead_code_check_lost_callers",
             "dead_code_check_unreachable", "merge_conflict_check", "cross_model"}
_MAPS = {"benchmark", "intent_verification", "cross_model"}


_MAP_KEYS = {
    "benchmark": {"enabled", "command", "threshold"},
    "intent_verification": {"enabled", "model", "provider", "block_on_no", "block_on_partial"},
    "cross_model": {"enabled", "reviewer", "reviewers", "quorum", "block_on_issues",
                    "on_request_changes"},
}


#: cross_model.on_request_changes: the writer fixes the reviewed work (seed 000's fix task)
FIX = "fix"


class GateConfigError(ValueError):
    """quality_gates cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    name: str
    required: bool = True
    condition: str = "always"
    command_override: str | None = None


@dataclass(frozen=True, slots=True)
class QualityGatesConfig:
    enabled: bool = True
    pipeline: tuple[GateSpec, ...] = ()
    timeout_s: float = 120.0
    base_ref: str | None = None
    cache_enabled: bool = True
    cache_max_entries: int = 2000
    allow_bypass: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)  # every other key, checked

    def option(self, key: str, default: Any = None) -> Any:
        value = self.options.get(key)
        return default if value is None else value


def _condition(value: object, where: str) -> str:
    text = str(value).strip()
    text = LEGACY_CONDITIONS.get(text, text)
    if text not in CONDITIONS:
        raise GateConfigError(f"{where}: condition '{value}' is not one of "
                              f"{', '.join(CONDITIONS)} (or changed_files.any('.py'))")
    return text


def _check_name(name: str, where: str, plugins: frozenset[str]) -> None:
    if name in SUPPORTED or name in plugins:
        return
    if name in NOT_YET:
        raise GateConfigError(f"{where}: gate '{name}' is not supported yet")
    raise GateConfigError(f"{where}: unknown gate '{name}' (built-in: "
                          f"{', '.join(sorted(SUPPORTED))}; or a plugin)")


def _typed(key: str, value: Any) -> Any:
    where = f"quality_gates.{key}"
    if key in _BOOLS and not isinstance(value, bool):
        if key == "benchmark" and isinstance(value, dict):
            return value
        raise GateConfigError(f"{where} must be true or false, got {brief(value)}")
    if key in _STRINGS and not isinstance(value, str):
        raise GateConfigError(f"{where} must be a string, got {brief(value)}")
    if key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise GateConfigError(f"{where} must be a number, got {brief(value)}")
    if key in _LISTS and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise GateConfigError(f"{where} must be a list of strings")
    return value


def parse_quality_gates(raw: object, plugins: frozenset[str] | Mapping[str, tuple[bool, str]]
                        = frozenset()) -> QualityGatesConfig:
    """The `quality_gates:` value → config; GateConfigError names the offending key.

    `plugins` maps each discovered plugin to its own (required, condition): they join the
    default pipeline, and fill in what a `pipeline:` entry naming them leaves out.
    """
    defaults = plugins if isinstance(plugins, Mapping) else {p: (True, "always")
                                                             for p in plugins}
    plugins = frozenset(defaults)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise GateConfigError("quality_gates must be a map")
    options: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "pipeline" or value is None:
            continue
        if key in _MAPS:
            if isinstance(value, bool) and key in _BOOLS:
                options[key] = value
                continue
            if not isinstance(value, dict):
                raise GateConfigError(f"quality_gates.{key} must be a map")
            options[key] = value
            continue
        if key in _NOT_YET_FLAGS:
            if value is not False:
                raise GateConfigError(f"quality_gates.{key}: gate '{_NOT_YET_FLAGS[key]}' "
                                      "is not supported yet")
            continue
        if key not in _BOOLS | _STRINGS | _NUMBERS | _LISTS | _ACCEPTED:
            raise GateConfigError(f"quality_gates.{key} is not a known key")
        options[key] = _typed(key, value)
    pipeline = raw.get("pipeline")
    specs: list[GateSpec] = []
    if pipeline is not None:
        if not isinstance(pipeline, list):
            raise GateConfigError("quality_gates.pipeline must be a list")
        for index, entry in enumerate(pipeline):
            where = f"quality_gates.pipeline[{index}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise GateConfigError(f"{where} needs a 'name'")
            unknown = set(entry) - {"name", "required", "condition", "command_override"}
            if unknown:
                raise GateConfigError(f"{where}: unknown key '{sorted(unknown)[0]}'")
            own_required, own_condition = defaults.get(entry["name"], (True, "always"))
            required = entry.get("required", own_required)
            if not isinstance(required, bool):
                raise GateConfigError(f"{where}.required must be true or false")
            override = entry.get("command_override")
            if override is not None and not isinstance(override, str):
                raise GateConfigError(f"{where}.command_override must be a string")
            _check_name(entry["name"], where, plugins)
            specs.append(GateSpec(entry["name"], required,
                                  _condition(entry.get("condition", own_condition), where),
                                  override))
        names = [s.name for s in specs]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise GateConfigError(f"quality_gates.pipeline lists '{duplicate}' twice")
    else:
        for flag, name, required, condition in DEFAULT_SPECS:
            value = options.get(flag, name in DEFAULT_ON)
            on = value.get("enabled", False) if isinstance(value, dict) else bool(value)
            if on:
                specs.append(GateSpec(name, required, condition))
        for name, (required, condition) in sorted(defaults.items()):  # dropped in: they run
            specs.append(GateSpec(name, required, _condition(condition, f"gate plugin {name}")))
    timeout = options.get("timeout_s", 120.0)
    if timeout <= 0:
        raise GateConfigError("quality_gates.timeout_s must be more than 0")
    for section, keys in _MAP_KEYS.items():
        value = options.get(section)
        if isinstance(value, dict):
            stray = sorted(set(value) - keys)
            if stray:
                raise GateConfigError(f"quality_gates.{section}.{stray[0]} is not a known key")
    cross = options.get("cross_model")
    if isinstance(cross, dict) and cross.get("on_request_changes", FIX) not in (FIX, "escalate"):
        raise GateConfigError("quality_gates.cross_model.on_request_changes must be fix "
                              "(a fix attempt on the reviewed work, the default) or escalate")
    base_ref = options.get("base_ref")
    return QualityGatesConfig(
        enabled=bool(options.get("enabled", True)),
        pipeline=tuple(specs),
        timeout_s=float(options.get("timeout_s", 120.0)),
        base_ref=str(base_ref) if base_ref else None,
        cache_enabled=bool(options.get("cache_enabled", True)),
        cache_max_entries=int(options.get("cache_max_entries", 2000)),
        allow_bypass=bool(options.get("allow_bypass", False)),
        options=options,
    )
