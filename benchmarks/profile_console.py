"""Profile the console's start on a real pty: `python -m benchmarks.profile_console DATASET`.

DATASET is `empty`, `small` or `large` (made by benchmarks.generate) or a project
directory. The console runs under pyinstrument until the first task rows (or the
empty screen) are painted plus `--settle` seconds, then quits with `q`; the
profile is written as text (and HTML beside it) under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import dataset, workdir  # noqa: E402
from benchmarks.terminal import Screen, wait_trace  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="keep profiling this long after the first paint")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out")
    parser.add_argument("--show-all", action="store_true",
                        help="keep Textual's and the standard library's frames in the report")
    args = parser.parse_args(argv)
    root = (dataset(args.dataset) if args.dataset in ("empty", "small", "large")
            else Path(args.dataset).resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.dataset if args.dataset in ("empty", "small", "large") else "project"
    text_out = args.out / f"profile-{name}.txt"
    trace = workdir() / "profile-trace.jsonl"
    argv_ = [sys.executable, "-m", "pyinstrument", "-i", "0.001", "-r", "text",
             *(["--show-all"] if args.show_all else []),
             "-o", str(text_out), "-m", "console", "-C", str(root),
             "--read-only"]
    screen = Screen(argv_, cwd=REPO, env={"BERNSTEIN_TUI_TRACE": str(trace)},
                    needles=("No tasks yet",))
    try:
        if name == "empty":
            screen.wait_text("No tasks yet", 60)
        else:
            wait_trace(trace, lambda m: m["rows"] > 0, 120)
        painted = time.time() - screen.started
        time.sleep(args.settle)
        screen.child.send("q")
        screen.wait_exit(60)
    finally:
        screen.close()
    print(f"first paint after {painted:.3f} s under the profiler; profile in {text_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
