"""Shared by the benchmarks: timing statistics and the machine they ran on."""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    name: str
    unit: str
    samples: list[float]
    target: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "median": self.median, "p99": self.p99,
                "runs": len(self.samples), "target": self.target, **self.notes}


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load": os.getloadavg()}
