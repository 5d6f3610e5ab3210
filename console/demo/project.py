"""`bernstein-tui demo DIR`: the demo project, written and committed, with its tickets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from console.sdd.skeleton import init_project

STOCK = '''"""A tiny inventory: the demo project the demo agent works on."""

from collections.abc import Iterator


class Stock:
    def __init__(self, counts: dict[str, int] | None = None) -> None:
        self._counts = dict(counts or {})

    def add(self, item: str, amount: int) -> None:
        if amount < 0:
            raise ValueError("amount must not be negative")
        self._counts[item] = self._counts.get(item, 0) + amount

    def count(self, item: str) -> int:
        return self._counts.get(item, 0)

    def items(self) -> Iterator[tuple[str, int]]:
        return iter(sorted(self._counts.items()))
'''
STOCK_TEST = '''import pytest

from inventory.stock import Stock


def test_add_and_count() -> None:
    stock = Stock()
    stock.add("pear", 2)
    assert stock.count("pear") == 2


def test_negative_amounts_are_refused() -> None:
    with pytest.raises(ValueError):
        Stock().add("pear", -1)
'''
PYPROJECT = '''[project]
name = "inventory"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
pythonpath = ["src"]

[tool.mypy]
mypy_path = "src"
'''


def config(python: str) -> str:
    return f"""\
# The bernstein-tui demo project. The agent is the scripted DEMO AGENT (a script
# agent, not a model): no API keys, no network. Run: bernstein-tui -C . (or --demo).
agents:
  script:
    command: [{json.dumps(python)}, "-I", "-m", "console.demo.agent"]
  timeouts: {{small: 60, medium: 90, large: 120}}
workers: 3
cascade:
  ladder: [haiku, sonnet, opus]
  min_observations: 1000    # the demo is too short for the bandit to learn from
complexity:
  iterations: {{trivial: 1, simple: 1, standard: 1, complex: 1}}
quality_gates:
  lint: true
  type_check: true
  tests: true
  tests_full_suite: true    # the demo suite is small: run it all on every attempt
  pii_scan: false
  timeout_s: 120
sla:
  check_interval: 1
  warning_threshold: 0.5
missions:
  - name: release-1.1
    tasks: [DEMO-01, DEMO-02, DEMO-08]
    qualityGates:
      - name: core-ready
        afterTasks: [DEMO-01, DEMO-02]
        blocksTasks: [DEMO-08]
        requireAllPassed: true
        notifyChannels: [console]
evolution:
  on_idle: true             # propose improvements once the backlog is done
  test_command: python -m pytest -q -p no:cacheprovider
"""


def ticket(tid: str, title: str, description: str, **extra: object) -> dict[str, object]:
    return {"id": tid, "title": title, "description": description, "role": "backend",
            "scope": "small", "complexity": "low", "estimated_minutes": 20, **extra}


TICKETS = [
    ticket("DEMO-01", "Add a restock function", "restock(stock, item, amount) with a test.",
           completion_signals=[{"type": "path_exists", "path": "src/inventory/restock.py"}]),
    ticket("DEMO-02", "Add a low-stock report", "low_stock(stock, threshold), sorted.",
           completion_signals=[{"type": "file_contains",
                                "path": "src/inventory/report.py", "contains": "def low_stock"}]),
    ticket("DEMO-03", "Apply bulk discounts", "10 % off from 10 items, 20 % from 100.",
           completion_signals=[{"type": "path_exists", "path": "src/inventory/discount.py"}]),
    ticket("DEMO-04", "Port the legacy pricing engine", "Port pricing.cob to Python."),
    ticket("DEMO-05", "Document the pricing engine", "Write docs/pricing.md.",
           depends_on=["DEMO-04"]),
    ticket("DEMO-06", "Nightly export", "Document the nightly export job.", sla_minutes=0.1),
    ticket("DEMO-07", "Fix a typo in the docs", "inventroy → inventory.", sla_minutes=2),
    ticket("DEMO-08", "Integration test for restock and report",
           "Once restock and the report exist, test them together."),
    ticket("DEMO-09", "Add a stock summary helper", "summary(stock) → lines 'item,count'."),
    ticket("DEMO-10", "Add a CSV export", "export(stock) → CSV lines."),
]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def write_demo(root: Path, python: str | None = None) -> list[str]:
    """Write the demo into root (empty or missing); returns the ticket ids."""
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; the demo needs an empty directory")
    (root / "src" / "inventory").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "inventory" / "__init__.py").write_text('"""Inventory."""\n')
    (root / "src" / "inventory" / "stock.py").write_text(STOCK)
    (root / "tests" / "test_stock.py").write_text(STOCK_TEST)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "README.md").write_text("# inventory\n\nThe bernstein-tui demo project.\n")
    (root / ".gitignore").write_text(".sdd/\n__pycache__/\n")
    (root / "bernstein.yaml").write_text(config(python or sys.executable))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=bernstein-tui demo", "-c", "user.email=demo@bernstein-tui.invalid",
        "commit", "-qm", "The demo project")
    init_project(root)
    open_dir = root / ".sdd" / "backlog" / "open"
    for item in TICKETS:
        name = f"{str(item['id']).lower()}.yaml"
        (open_dir / name).write_text(yaml.safe_dump(item, sort_keys=False))
    return [str(t["id"]) for t in TICKETS]
