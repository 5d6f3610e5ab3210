"""Peak memory (and time) of `--server` against a hostile task server, next to the same
against a well-behaved one; and `status` on a project holding a YAML alias bomb.

The server is tests/security/hostile_server.py on 127.0.0.1 (issue #16): each mode
makes one route misbehave. `bernstein-tui --server URL status --json` runs to its end
and its own peak RSS is read from wait4's rusage. The event-stream modes are not read by
`status`: for them the child follows the server with a RemoteSource (the console's data
side, events on) for FOLLOW_S seconds. Limits are the defaults (10 s deadline, 32 MB
body, 1 MB event line): a drip costs the whole deadline, by design.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, Figure
from tests.security.hostile_server import HostileServer, alias_bomb, run_measured

FOLLOW_S = 5.0
#: mode name → the routes it makes misbehave
STATUS_MODES: dict[str, dict[str, str]] = {
    "well-behaved": {},
    "slow body (drip)": {"/tasks": "drip-body"},
    "slow headers (drip)": {"/tasks": "drip-head"},
    "huge body (500 MB claimed)": {"/tasks": "huge"},
    "huge body (chunked, endless)": {"/tasks": "huge-chunked"},
    "endless paging (repeat)": {"/tasks": "paging-repeat"},
    "endless paging (new ids, counts 10^12)": {"/tasks": "paging-fresh",
                                               "/tasks/counts": "counts-huge"},
    "wrong shapes": {r: "shapes" for r in ("/health", "/tasks", "/tasks/archive",
                                           "/approvals")},
    "markup in errors": {"/tasks": "markup"},
    "escapes in titles": {"/tasks": "escapes"},
}
FOLLOW_MODES: dict[str, dict[str, str]] = {
    "well-behaved": {},
    "endless event line": {"/events": "endless-line"},
    "endless event data": {"/events": "endless-data"},
}


def _status(modes: dict[str, str]) -> tuple[float, float, int]:
    with HostileServer(modes) as server:
        out = run_measured([sys.executable, "-m", "console", "--server", server.url, "status",
                            "--json"], timeout=300)
    return out.peak_rss_mb, out.seconds, out.returncode


def _follow(modes: dict[str, str]) -> tuple[float, float, int]:
    with HostileServer(modes) as server:
        out = run_measured([sys.executable, "-m", "benchmarks.hostile", "follow", server.url,
                            str(FOLLOW_S)], timeout=300, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1:])
    return out.peak_rss_mb, out.seconds, out.returncode


def follow(url: str, seconds: float) -> None:
    """The child: a RemoteSource following `url` (events on) for `seconds`."""
    from console.remote.client import ServerClient
    from console.remote.source import RemoteSource

    source = RemoteSource(ServerClient(url), backoff_s=0.2)
    source.start(lambda delta: None)
    time.sleep(seconds)
    source.stop()
    print(f"resyncs {source.resyncs}, stream: {source.health.detail or 'live'}")


def _figures(kind: str, modes: dict[str, dict[str, str]], measure, runs: int  # type: ignore[no-untyped-def]
             ) -> list[Figure]:
    figures = []
    baseline = None
    for name, routes in modes.items():
        results = [measure(routes) for _ in range(runs)]
        rss = [r[0] for r in results]
        if baseline is None:
            baseline = statistics.median(rss)
        figures.append(Figure(
            f"{kind}: {name}", "MB", rss, target="bounded (limits in README)",
            notes={"vs_well_behaved": round(statistics.median(rss) / baseline, 2),
                   "seconds": round(statistics.median(r[1] for r in results), 2),
                   "exit": results[0][2]}))
    return figures


def alias_bomb_status(runs: int) -> list[Figure]:
    """`status` on a project whose one ticket is a 9**10-value alias bomb, vs a plain one."""
    from console.sdd.skeleton import init_project

    figures = []
    for name, text in (("plain ticket", "title: plain\nrole: backend\n"),
                       ("alias-bomb ticket", alias_bomb(levels=10))):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            init_project(root)
            (root / ".sdd" / "backlog" / "open" / "t.yaml").write_text(text)
            results = [run_measured([sys.executable, "-m", "console", "-C", str(root),
                                     "status"], timeout=300) for _ in range(runs)]
        figures.append(Figure(f"status: {name}", "s", [r.seconds for r in results],
                              target="well under 1 s" if "bomb" in name else "",
                              notes={"bytes": len(text.encode()),
                                     "peak_MB": round(max(r.peak_rss_mb for r in results), 1)}))
    return figures


def run(quick: bool) -> list[Figure]:
    runs = 1 if quick else 3
    return (_figures("--server status --json peak RSS", STATUS_MODES, _status, runs)
            + _figures(f"--server events {FOLLOW_S:g} s peak RSS", FOLLOW_MODES, _follow, runs)
            + alias_bomb_status(runs))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    if sys.argv[1:2] == ["follow"]:
        follow(sys.argv[2], float(sys.argv[3]))
