"""The names seed 000's plugin example imports, for a project without Bernstein installed:
`bernstein.core.quality.gate_plugins.GatePlugin` and
`bernstein.core.quality.gate_runner.GateResult`.

`provide()` puts a finder at the *end* of `sys.meta_path`: it answers only for those
modules (and their parent packages) and only when nothing before it finds them, so an
installed Bernstein is always the one imported. A plugin file written against
Bernstein's API thus loads here unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGES = ("bernstein", "bernstein.core", "bernstein.core.quality")
MODULES = ("bernstein.core.quality.gate_plugins", "bernstein.core.quality.gate_runner")


class GatePlugin:
    """Base class for custom gates (subclassing is optional: the shape is what counts):
    `name`, `required`, `condition` and `run(changed_files, run_dir, task_title,
    task_description)` returning a result with a status (an object or a dict)."""

    name: str = ""
    required: bool = True
    condition: str = "always"

    def run(self, changed_files: list[str], run_dir: Path, task_title: str,
            task_description: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class GateResult:
    """What a gate plugin returns, with the fields of Bernstein's GateResult."""

    name: str
    status: str
    required: bool = True
    blocked: bool = False
    cached: bool = False
    duration_ms: int = 0
    details: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__.endswith(".gate_plugins"):
            setattr(module, "GatePlugin", GatePlugin)  # noqa: B010 - a module made here
            setattr(module, "GateResult", GateResult)  # noqa: B010
        elif module.__name__.endswith(".gate_runner"):
            setattr(module, "GateResult", GateResult)  # noqa: B010


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PACKAGES and fullname not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(),
                                              is_package=fullname in PACKAGES)


def provide() -> None:
    """Make seed 000's imports resolvable (once; an installed Bernstein still wins)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
