"""Custom gates: entry points in the group `bernstein.gates` and files in
`.bernstein/gates/*.py`, classes with seed 000's GatePlugin interface:
`name`, `required`, `condition`, and `run(changed_files, run_dir, task_title,
task_description)` returning a result with a status (an object or a dict). A file may
import Bernstein's own names, as seed 000's example does (gates/seed_api). Changed
files are relative to `run_dir`, as Bernstein passes them.

A name that collides with a built-in or with another plugin is refused naming
both; a plugin that raises yields a failed gate with the error.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.engine.gates.base import GateContext, Verdict
from console.engine.gates.seed_api import GatePlugin, GateResult, provide
from console.sdd.gate_config import SUPPORTED

ENTRY_POINT_GROUP = "bernstein.gates"
STATUSES = frozenset({"pass", "fail", "warn", "timeout", "skipped", "bypassed"})


class PluginError(Exception):
    """A plugin cannot be loaded; the message names it and, for collisions, both."""


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    name: str
    origin: str
    instance: Any

    @property
    def required(self) -> bool:
        return bool(getattr(self.instance, "required", True))

    @property
    def condition(self) -> str:
        return str(getattr(self.instance, "condition", "always"))


def _is_plugin(obj: object) -> bool:
    return (inspect.isclass(obj) and obj not in (GatePlugin, GateResult)
            and callable(getattr(obj, "run", None)) and hasattr(obj, "name")
            and obj.__module__ != GatePlugin.__module__)


def _instantiate(cls: Any, origin: str) -> Any:
    try:
        return cls()
    except Exception as exc:
        raise PluginError(f"gate plugin {origin} cannot be created without arguments: "
                          f"{type(exc).__name__}: {exc}") from None


def _instances(module: Any, origin: str) -> list[tuple[Any, str]]:
    found = []
    for _name, obj in inspect.getmembers(module, _is_plugin):
        if obj.__module__ == module.__name__:
            where = f"{origin}:{obj.__name__}"
            found.append((_instantiate(obj, where), where))
    return found


def _load_file(path: Path) -> list[tuple[Any, str]]:
    provide()  # seed 000's example imports Bernstein's names: they resolve here too
    name = f"bernstein_tui_gate_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load gate plugin {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise PluginError(f"gate plugin {path} failed to load: {type(exc).__name__}: "
                          f"{exc}") from None
    return _instances(module, str(path))


def _plugin_files(project: Path) -> list[Path]:
    """`.bernstein/gates/*.py`, regular files in real directories only: workspace trust
    hashes a link as its target's name, so code behind a link could change unseen."""
    directory = project / ".bernstein" / "gates"
    for where in (directory.parent, directory):
        if where.is_symlink():
            raise PluginError(f"{where} is a symbolic link; gate plugins must be files "
                              "in the project itself")
    files = sorted(directory.glob("*.py")) if directory.is_dir() else []
    for path in files:
        if path.is_symlink() or not path.is_file():
            raise PluginError(f"gate plugin {path} is not a regular file (a link or "
                              "another kind); refused")
    return files


def discover(project: Path) -> dict[str, LoadedPlugin]:
    """Every plugin by name; PluginError on a collision or a broken plugin."""
    candidates: list[tuple[Any, str]] = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
        except Exception as exc:
            raise PluginError(f"gate plugin entry point '{entry.name}' failed to load: "
                              f"{type(exc).__name__}: {exc}") from None
        version = getattr(entry.dist, "version", None) if entry.dist else None
        origin = f"entry point {entry.name} ({entry.value}{' ' + version if version else ''})"
        candidates.append((_instantiate(loaded, origin) if inspect.isclass(loaded) else loaded,
                           origin))
    for path in _plugin_files(project):
        candidates += _load_file(path)
    plugins: dict[str, LoadedPlugin] = {}
    for instance, origin in candidates:
        name = str(getattr(instance, "name", "") or "")
        if not name:
            raise PluginError(f"gate plugin {origin} has no name")
        if name in SUPPORTED:
            raise PluginError(f"gate plugin {origin} is named '{name}', which is a built-in "
                              "gate; rename the plugin")
        if name in plugins:
            raise PluginError(f"gate plugins {plugins[name].origin} and {origin} are both "
                              f"named '{name}'")
        plugins[name] = LoadedPlugin(name, origin, instance)
    return plugins


def _field(result: Any, key: str, default: Any = None) -> Any:
    if isinstance(result, Mapping):
        return result.get(key, default)
    return getattr(result, key, default)


def run_plugin(plugin: LoadedPlugin, ctx: GateContext) -> Verdict:
    try:
        result = plugin.instance.run(list(ctx.changed), ctx.root, ctx.task_title,
                                     ctx.task_description)
    except Exception as exc:
        return Verdict("fail", f"plugin {plugin.name} raised {type(exc).__name__}: {exc}",
                       metadata={"plugin": plugin.origin})
    status = str(_field(result, "status", "") or "")
    if status not in STATUSES:
        passed = _field(result, "passed")
        if isinstance(passed, bool):
            status = "pass" if passed else "fail"
        else:
            return Verdict("fail", f"plugin {plugin.name} returned no valid status "
                                   f"({status!r})", metadata={"plugin": plugin.origin})
    details = str(_field(result, "details", "") or _field(result, "detail", "") or "")
    metadata = _field(result, "metadata", {}) or {}
    try:  # whatever the plugin put there must survive JSON (records, cache)
        metadata = json.loads(json.dumps(metadata if isinstance(metadata, dict) else {},
                                         default=str))
    except (TypeError, ValueError):
        metadata = {}
    return Verdict(status, details, str(_field(result, "digest", "") or ""),
                   {"plugin": plugin.origin, **metadata})
