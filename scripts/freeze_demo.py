"""Record a demo run as fixed data: `python scripts/freeze_demo.py`.

Runs the real demo (project, engine, demo agent) headless to idle in a temp
directory, then copies its `.sdd/` to tests/fixtures/demo-frozen/ with every
epoch timestamp shifted so the run starts at FROZEN_START, and the temp path
replaced by `<project>`. The snapshot tests and scripts/screenshots.py open
that copy with the clock frozen at FROZEN_NOW (tests/frozen_demo.py), so they
draw the same pixels on every machine. Re-run this after a change to the demo
or to a format, then review and commit the fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from console.demo.project import write_demo  # noqa: E402
from tests.frozen_demo import FIXTURE, FROZEN_START  # noqa: E402

SKIP_DIRS = {"worktrees", "caching", "inbox", "heartbeats", "trust", "attestations"}
SKIP_SUFFIXES = (".pid", ".lock", ".gitignore")  # a runtime/.gitignore would hide the logs
EPOCH_RANGE = (1e9, 1e10)


def shift(value: Any, by: float, root: str) -> Any:
    if isinstance(value, dict):
        return {k: shift(v, by, root) for k, v in value.items()}
    if isinstance(value, list):
        return [shift(v, by, root) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and EPOCH_RANGE[0] < value < EPOCH_RANGE[1]:
        return round(value + by, 3)
    if isinstance(value, str) and root in value:
        return value.replace(root, "<project>")
    return value


def first_created(sdd: Path) -> float:
    times = [json.loads(line).get("created_at") or 0
             for line in (sdd / "runtime" / "tasks.jsonl").read_text().splitlines() if line]
    return min(t for t in times if t)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="freeze-demo-"))
    project = work / "inventory"
    write_demo(project)
    # trusted in a config dir of its own: the user's trust file never lists it
    env = {**os.environ, "XDG_CONFIG_HOME": str(work / "config")}
    subprocess.run([sys.executable, "-m", "console", "-C", str(project), "trust"],
                   capture_output=True, env=env, check=True)
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(project), "run",
                          "--until-idle", "--exit-zero"],  # DEMO-04 fails, as the demo shows
                         capture_output=True, text=True, timeout=600, env=env)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    sdd = project / ".sdd"
    by = FROZEN_START - first_created(sdd)
    target = FIXTURE / ".sdd"
    shutil.rmtree(target, ignore_errors=True)
    for path in sorted(sdd.rglob("*")):
        rel = path.relative_to(sdd)
        if path.is_dir() or set(rel.parts) & SKIP_DIRS or path.name.endswith(SKIP_SUFFIXES):
            continue
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".jsonl":
            lines = [json.dumps(shift(json.loads(line), by, str(project)))
                     for line in path.read_text().splitlines() if line.strip()]
            out.write_text("".join(line + "\n" for line in lines))
        elif path.suffix == ".json":
            out.write_text(json.dumps(shift(json.loads(path.read_text()), by, str(project)),
                                      indent=2) + "\n")
        else:
            out.write_text(path.read_text(errors="replace").replace(str(project), "<project>"))
    shutil.copy(project / "bernstein.yaml", FIXTURE / "bernstein.yaml")
    shutil.rmtree(work, ignore_errors=True)
    print(f"froze the demo run into {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
