"""The `.sdd/` store: paths, formats, atomic writes, incremental readers, State, watcher.

Imports neither Textual nor the engine (tests/test_layers.py enforces it).
"""

from console.sdd.paths import Kind, SddPaths
from console.sdd.source import LocalSource
from console.sdd.state import Delta, State

__all__ = ["Delta", "Kind", "LocalSource", "SddPaths", "State"]
