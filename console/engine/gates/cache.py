"""The gate cache: a verdict keyed by the diff, the gate's configuration and the tool's
version, so a re-run on an unchanged change answers in milliseconds. One small file
per entry under .sdd/caching/gates/ (or .git/ for a repo without .sdd/); bounded by
entry count, oldest dropped first; safe to delete at any time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import stat
import threading
from pathlib import Path

from console.engine.gates.base import Verdict
from console.sdd.confine import SddDir
from console.sdd.fileio import atomic_write_json, read_json_object


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "replace"))
        digest.update(b"\0")
    return digest.hexdigest()


class GateCache:
    def __init__(self, directory: Path, max_entries: int = 2000) -> None:
        self.directory = directory
        self.max_entries = max_entries
        self._writes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> Verdict | None:
        data, _problem = read_json_object(self.directory / f"{key}.json", key)
        if data is None:
            return None
        try:
            return Verdict(str(data["status"]), str(data["details"]), str(data.get("digest", "")),
                           dict(data.get("metadata") or {}))
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, verdict: Verdict) -> None:
        atomic_write_json(self.directory / f"{key}.json", {
            "status": verdict.status, "details": verdict.details, "digest": verdict.digest,
            "metadata": dict(verdict.metadata)})
        with self._lock:
            self._writes += 1
            due = self._writes % 50 == 1
        if due:
            self._trim()

    def _trim(self) -> None:
        """The oldest entries go, removed through the directory's descriptor (reached from
        the project root with no link on the way), so a cache directory swapped for a
        link never removes anything elsewhere."""
        try:
            folder = SddDir.of(self.directory, what="gate cache")
        except OSError:  # gone, a link, or not in a project (nothing to trim there)
            return
        with folder:
            try:
                entries = [(info.st_mtime, name) for name in folder.names()
                           if name.endswith(".json") and (info := folder.lstat(name))
                           is not None and stat.S_ISREG(info.st_mode)]
            except OSError:
                return
            entries.sort()
            for _mtime, name in entries[: max(0, len(entries) - self.max_entries)]:
                with contextlib.suppress(OSError):
                    folder.unlink(name)


def describe(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)
