"""Missions and their phase quality gates, as written (seed 003, Polpo): in
bernstein.yaml `missions:` or `.sdd/missions/*.yaml`. A mission lists its tasks by ticket
id or title, `qualityGates` (name, afterTasks, blocksTasks, minScore, requireAllPassed,
notifyChannels), a `qualityThreshold` and a `deadline`. The one reader of the format;
the engine keeps the gates (engine/missions.py), the console shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from console.sdd.fields import RecordError, brief, to_epoch
from console.sdd.fileio import read_regular_file
from console.sdd.paths import SddPaths
from console.sdd.safe_yaml import load_yaml

#: a mission file is read up to this many bytes
MAX_MISSION_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PhaseGate:
    name: str
    after: tuple[str, ...]
    blocks: tuple[str, ...]
    min_score: float | None = None
    require_all_passed: bool = False
    channels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Mission:
    id: str
    tasks: tuple[str, ...]
    gates: tuple[PhaseGate, ...]
    threshold: float | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    deadline: float | None = None


def _names(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    out = []
    for item in value:
        if isinstance(item, dict):
            item = item.get("id") or item.get("title")
        if not isinstance(item, str | int) or isinstance(item, bool):
            raise ValueError(f"{where} lists {brief(item)}, not a task id or title")
        out.append(str(item))
    return tuple(out)


def parse_mission(raw: object, where: str) -> Mission:
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a map")
    name = str(raw.get("id") or raw.get("name") or "").strip()
    if not name:
        raise ValueError(f"{where} needs a name")
    gates = []
    for index, gate in enumerate(raw.get("qualityGates") or raw.get("quality_gates") or []):
        at = f"{where}.qualityGates[{index}]"
        if not isinstance(gate, dict) or not gate.get("name"):
            raise ValueError(f"{at} needs a name")
        score = gate.get("minScore", gate.get("min_score"))
        gates.append(PhaseGate(
            str(gate["name"]), _names(gate.get("afterTasks"), f"{at}.afterTasks"),
            _names(gate.get("blocksTasks"), f"{at}.blocksTasks"),
            None if score is None else float(score),
            bool(gate.get("requireAllPassed", gate.get("require_all_passed", False))),
            _names(gate.get("notifyChannels"), f"{at}.notifyChannels")))
    weights = {}
    for item in raw.get("tasks") or []:
        if isinstance(item, dict) and "priority" in item:
            weights[str(item.get("id") or item.get("title"))] = float(item["priority"])
    threshold = raw.get("qualityThreshold", raw.get("quality_threshold"))
    deadline = raw.get("deadline")
    return Mission(name, _names(raw.get("tasks"), f"{where}.tasks"), tuple(gates),
                   None if threshold is None else float(threshold), weights,
                   None if deadline is None else to_epoch(f"{where}.deadline", deadline))


def load_missions(paths: SddPaths, raw: object) -> tuple[list[Mission], list[str]]:
    """Missions from bernstein.yaml and .sdd/missions/; (missions, problems)."""
    missions, problems = [], []
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            missions.append(parse_mission(item, f"missions[{index}]"))
        except (ValueError, TypeError) as exc:
            problems.append(f"bernstein.yaml: {exc}")
    directory = paths.sdd / "missions"
    for path in sorted(directory.glob("*.y*ml")) if directory.is_dir() else []:
        data, problem = read_regular_file(path, paths.display(path), MAX_MISSION_BYTES)
        if data is None:
            problems.append(str(problem))
            continue
        try:
            missions.append(parse_mission(load_yaml(data.decode("utf-8")), paths.display(path)))
        except (ValueError, TypeError, RecordError, yaml.YAMLError) as exc:
            problems.append(f"{paths.display(path)}: {exc}")
    return missions, problems
