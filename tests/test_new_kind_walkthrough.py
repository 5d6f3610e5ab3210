"""#18: adding a JSONL file kind with its own detail tab touches at most four files —
done here for real, as CONTRIBUTING.md walks through it: a copy of the package gets a
`metrics/benchmarks.jsonl` kind (record, Kind, KindSpec, tab), and a console started on
that copy reads the file and shows the task's benchmarks in their own tab."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

EDITS = {
    "console/records.py": ("", '''

class Benchmark(msgspec.Struct, frozen=True, gc=False):
    """One line of metrics/benchmarks.jsonl."""

    task_id: str
    name: str
    score: float
'''),
    "console/sdd/paths.py": ('    ENGINE_EVENTS = "runtime/engine_events.jsonl"\n',
                             '    BENCHMARKS = "metrics/benchmarks.jsonl"\n'),
    "console/sdd/kinds.py": ("", '''

def _decode_benchmark(raw: Mapping[str, Any]) -> Any:
    from console.records import Benchmark
    from console.sdd.fields import float_or, req_str

    return Benchmark(req_str(raw, "task_id"), req_str(raw, "name"),
                     float_or(raw, "score", 0.0))


KINDS = {**KINDS, Kind.BENCHMARKS: KindSpec(_decode_benchmark, Section.METRICS,
                                            *per_task_list(Kind.BENCHMARKS), detail=True)}
DETAIL_SECTIONS = frozenset(spec.section for spec in KINDS.values() if spec.detail)
'''),
    "console/tui/widgets/task_detail.py": ("RECORD_TABS: tuple[tuple[str, str, Kind, "
                                           "Callable[[list[Any]], RenderableType]], ...] = ()",
                                           None),
}
TAB = ('RECORD_TABS = (("bench", "Benchmarks", Kind.BENCHMARKS, lambda records: Text("\\n".join('
       'f"{r.name}: {r.score}" for r in records) or "none")),)')


def _copy(tmp: Path) -> Path:
    copy = tmp / "repo"
    shutil.copytree(REPO / "console", copy / "console",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "styles", copy / "styles")
    return copy


def _apply(copy: Path) -> None:
    for rel, (after, text) in EDITS.items():
        path = copy / rel
        source = path.read_text()
        if text is None:  # a line replaced
            assert after in source, rel
            source = source.replace(after, TAB)
        elif after:  # inserted after an anchor line
            assert after in source, rel
            source = source.replace(after, after + text)
        else:
            source += text
        path.write_text(source)


def _changed(a: Path, b: Path) -> list[str]:
    out: list[str] = []
    def walk(cmp: filecmp.dircmp[str], prefix: str) -> None:
        out.extend(f"{prefix}{name}" for name in cmp.diff_files + cmp.left_only + cmp.right_only)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")
    walk(filecmp.dircmp(a, b, ignore=["__pycache__"]), "")
    return sorted(out)


SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from console.tui.app import ConsoleApp
    from console.tui.widgets.task_table import TaskTable

    async def main():
        app = ConsoleApp(__import__("pathlib").Path(sys.argv[1]))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                pane = app.query_one_optional("#detail-bench")
                if pane is not None and "tests: 0.93" in str(pane.render()):
                    print("SHOWN", str(pane.render()))
                    return
            print("NOT SHOWN")

    asyncio.run(main())
""")


def test_a_new_kind_with_a_tab_is_four_files(tmp_path: Path, project: Path) -> None:
    copy = _copy(tmp_path)
    pristine = _copy(tmp_path / "before")
    _apply(copy)
    assert _changed(pristine / "console", copy / "console") == sorted(
        rel.removeprefix("console/") for rel in EDITS)
    (project / ".sdd/runtime/tasks.jsonl").write_text(json.dumps(
        {"id": "T1", "title": "Bench", "status": "done", "role": "backend"}) + "\n")
    (project / ".sdd/metrics").mkdir(parents=True, exist_ok=True)
    (project / ".sdd/metrics/benchmarks.jsonl").write_text(json.dumps(
        {"task_id": "T1", "name": "tests", "score": 0.93}) + "\n")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(project)], cwd=copy,
                          env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert "SHOWN" in done.stdout and "NOT SHOWN" not in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]
