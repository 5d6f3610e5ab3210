"""`.sdd/knowledge/` (seed 001): project context injected into every agent prompt.

Markdown and text files directly in the folder, in name order, each a regular file
inside the project (a link anywhere on the way is refused, and said once per prompt),
64 KiB in all; the rest is left out with a note.
"""

from __future__ import annotations

from pathlib import Path

from console.sdd.confine import UnsafePath, sdd_path
from console.sdd.fileio import read_regular_file

MAX_KNOWLEDGE_BYTES = 64 * 1024
SUFFIXES = (".md", ".txt")


def knowledge_section(root: Path) -> tuple[str, list[str]]:
    """(the prompt section, problems); empty when there is no knowledge."""
    try:
        folder = sdd_path(root, "knowledge", what="knowledge folder")
    except UnsafePath as exc:
        return "", [str(exc)]
    if not folder.is_dir():
        return "", []
    parts: list[str] = []
    problems: list[str] = []
    left = MAX_KNOWLEDGE_BYTES
    for entry in sorted(folder.iterdir()):
        if not entry.name.endswith(SUFFIXES):
            continue
        try:
            path = sdd_path(root, "knowledge", entry.name, what="knowledge file")
        except UnsafePath as exc:
            problems.append(str(exc))
            continue
        data, problem = read_regular_file(path, f".sdd/knowledge/{entry.name}", left)
        if problem is not None:
            problems.append(str(problem))
            continue
        if not data:
            continue
        left -= len(data)
        parts.append(f"## {entry.name}\n{data.decode('utf-8', 'replace').strip()}")
        if left <= 0:
            parts.append(f"(more knowledge left out: {MAX_KNOWLEDGE_BYTES // 1024} KiB in all)")
            break
    if not parts:
        return "", problems
    return "# Project knowledge (.sdd/knowledge/)\n\n" + "\n\n".join(parts), problems
