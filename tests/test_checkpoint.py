"""The checkpoint of a full read (#22.2): a start from it makes the same State as a cold
read of the files as they are now — each file resumed from where it was read to when it
is still that file, read again when it was truncated, replaced or rewritten in place —
and a checkpoint that is damaged, from another version, or made with another user's key
is ignored."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from benchmarks.generate import Sizes, generate
from console.sdd import checkpoint, sealed
from console.sdd import source as source_module
from console.sdd.chain_state import SavedChains
from console.sdd.fileio import file_signature
from console.sdd.paths import JSONL_KINDS, Kind, SddPaths
from console.sdd.source import LocalSource
from console.sdd.state import State
from console.sdd.summary import summarise

GATES = Kind.GATE_LINES.value


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    generate(root, Sizes.small(), seed=3)
    with open(root / ".sdd" / GATES, "ab") as handle:  # a bad line: its problem is kept
        handle.write(b'{"task_id": "T-x", "gate": "lint"}\n')
    return root


def _picture(state: State) -> dict[str, Any]:
    """Everything the console shows from the JSONL kinds, comparable."""
    return {
        "summary": json.loads(json.dumps(summarise(state), default=str)),
        "tasks": state.tasks, "chains": state.chains, "archive": state.archive,
        "chains_of": {t: state.chains_of(t) for t in sorted(state.last_chain)},
        "last_chain": {t: c.chain_id for t, c in state.last_chain.items()},
        "gate_counts": {g: dict(c) for g, c in state.gate_counts.items()},
        "gate_stats": {g: (s.runs, s.passed, s.skipped, s.cached, s.total_ms,
                           list(s.recent)) for g, s in state.gate_stats.items()},
        "latest": {t: list(state.latest_gates(t).items()) for t in state.gate_tasks()},
        "reflections": dict(state.reflections), "reviews": dict(state.reviews),
        "metrics": state.task_metrics, "sla": state.sla_latest,
        "proposals": state.proposals, "decisions": dict(state.decisions),
        "events": list(state.engine_events), "queue": state.review_queue,
        "problems": [(p.file, p.line, p.reason) for p in state.problems],
        "gate_reports": state.gate_reports, "report_files": state.gate_report_files(),
        "tickets": state.tickets, "ticket_files": state.files_of(Kind.TICKET),
    }


def _cold(root: Path) -> dict[str, Any]:
    source = LocalSource(root, checkpoint_after=None)
    source.load()
    return _picture(source.state)


def _checkpointed(root: Path) -> None:
    source = LocalSource(root, checkpoint_after=0)
    source.load()
    assert source.save_checkpoint(force=True)
    assert SddPaths(root).checkpoint.is_file()


def _warm(root: Path) -> tuple[LocalSource, dict[str, Any]]:
    source = LocalSource(root, checkpoint_after=0)
    source.load()
    return source, _picture(source.state)


def test_an_unchanged_project_starts_from_the_checkpoint(project: Path) -> None:
    _checkpointed(project)
    source, warm = _warm(project)
    assert source.restored == frozenset(JSONL_KINDS) - {
        k for k in JSONL_KINDS if not (project / ".sdd" / k.value).exists()
    } | {Kind.GATE_REPORT, Kind.TICKET}
    assert sum(t.bytes_read for t in source.tails.values()) == 0  # nothing read again
    assert warm["gate_reports"] and warm["tickets"]  # (their files are not read again)
    assert warm == _cold(project)
    assert any("missing required key 'status'" in p[2] for p in warm["problems"])


def test_appended_lines_are_read_from_where_the_checkpoint_stood(project: Path) -> None:
    _checkpointed(project)
    line = {"timestamp": "2026-02-01T00:00:00+00:00", "task_id": "NEW-1", "gate": "lint",
            "result": "pass", "status": "pass", "duration_ms": 7}
    script = (f"open({str(project / '.sdd' / GATES)!r}, 'a').write("
              f"{json.dumps(json.dumps(line))} + '\\n')")
    subprocess.run([sys.executable, "-c", script], check=True)  # another process
    source, warm = _warm(project)
    assert Kind.GATE_LINES in source.restored
    assert source.tails[Kind.GATE_LINES].bytes_read == len(json.dumps(line)) + 1
    assert warm == _cold(project) and warm["latest"]["NEW-1"][0][1].duration_ms == 7


CHAINS = "metrics/cascade_chains.jsonl"


def test_a_warm_starts_chains_are_decoded_only_when_asked(project: Path) -> None:
    """The first paint and `status` need the chains' counts, not the chains."""
    _checkpointed(project)
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    state = source.state
    assert Kind.CHAINS in source.restored and state._saved_chains is not None
    cold = LocalSource(project, checkpoint_after=None)
    cold.load()
    assert summarise(state) == summarise(cold.state)
    assert state.last_chain == cold.state.last_chain  # (every task row's model)
    assert state._saved_chains is not None  # (none of that decoded them)
    assert state.chains == cold.state.chains and state._saved_chains is None
    assert state.chain_stats() == cold.state.chain_stats() != (0, 0)


@pytest.mark.parametrize("then", ["appended", "truncated"])
def test_a_chain_line_after_the_checkpoint_goes_after_its_chains(project: Path,
                                                                  then: str) -> None:
    _checkpointed(project)
    path = project / ".sdd" / CHAINS
    line = json.dumps({"chain_id": "NEW-C", "task_id": "NEW-T", "role": "qa",
                       "attempts": [{"model": "opus", "attempt_number": 0, "success": True}],
                       "final_model": "opus", "succeeded": True, "total_cost_usd": 2.5})
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    assert source.state._saved_chains is not None
    if then == "appended":
        with open(path, "a") as handle:
            handle.write(line + "\n")
    else:
        path.write_text(line + "\n")
    source.refresh([path])
    cold = LocalSource(project, checkpoint_after=None)
    cold.load()
    assert list(source.state.chains.items()) == list(cold.state.chains.items())
    assert list(source.state.chains)[-1] == "NEW-C"
    assert source.state.chain_cost == pytest.approx(cold.state.chain_cost)
    assert summarise(source.state) == summarise(cold.state)


def test_saved_chains_that_cannot_be_decoded_are_a_problem_not_a_crash() -> None:
    def broken() -> list:
        raise ValueError("truncated msgpack")

    state = State()
    state.save_chains(SavedChains(".sdd/" + CHAINS, 3, 1, broken))
    assert state.chain_stats() == (3, 1)
    assert state.chains == {} and state.chain_stats() == (0, 0)
    assert [(p.file, p.reason) for p in state.problems] == [
        (".sdd/" + CHAINS, "the checkpoint's chains are unreadable (truncated msgpack): "
                           "read again at the next start")]


def test_chains_that_could_not_be_decoded_are_read_cold_at_the_next_start(
        project: Path) -> None:
    _checkpointed(project)
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    assert source.state._saved_chains is not None
    source.state.save_chains(SavedChains(".sdd/" + CHAINS, 1, 0, lambda: [][1]))
    assert source.save_checkpoint(force=True)  # (the save is the first to decode them)
    assert source.state.chains_lost and source.state.chains == {}
    after, warm = _warm(project)
    assert Kind.CHAINS not in after.restored and Kind.TASKS in after.restored
    assert warm == _cold(project)
    path = project / ".sdd" / CHAINS  # (the file read from its start: nothing lost)
    path.write_bytes(path.read_bytes()[:path.read_bytes().index(b"\n") + 1])
    source.refresh([path])
    assert not source.state.chains_lost and len(source.state.chains) == 1


def _rewrite_same_size(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = data.index(b'"pass"', len(data) // 2)
    data[middle:middle + 6] = b'"fail"'
    with open(path, "r+b") as handle:  # in place: same inode, same size, same head
        handle.write(data)


@pytest.mark.parametrize("change", ["truncated", "replaced", "rewritten in place",
                                    "removed"])
def test_a_changed_file_is_read_again(project: Path, change: str) -> None:
    _checkpointed(project)
    path = project / ".sdd" / GATES
    if change == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: data.index(b"\n", len(data) // 3) + 1])
    elif change == "replaced":
        fresh = path.with_name("fresh.jsonl")
        fresh.write_bytes(path.read_bytes().replace(b'"pass"', b'"warn"', 3))
        os.replace(fresh, path)
    elif change == "rewritten in place":
        _rewrite_same_size(path)
    else:
        path.unlink()
    source, warm = _warm(project)
    assert Kind.GATE_LINES not in source.restored and Kind.TASKS in source.restored
    assert warm == _cold(project)


def test_a_gate_report_is_read_again_only_when_its_file_changed(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = SddPaths(project).gates_dir
    kept, changed, removed = sorted(gates.glob("*.json"))[:3]
    (gates / "unreadable.json").write_text("{not json")  # a problem: never checkpointed
    _checkpointed(project)
    report = json.loads(changed.read_text())
    report["overall_pass"] = not report["overall_pass"]
    changed.write_text(json.dumps(report))
    removed.unlink()
    (gates / "new.json").write_text(kept.read_text().replace(kept.stem, "NEW-1"))
    read: list[str] = []
    real = LocalSource._read_gate_report
    monkeypatch.setattr(LocalSource, "_read_gate_report",
                        lambda self, path: read.append(path.name) or real(self, path))
    source, warm = _warm(project)
    assert Kind.GATE_REPORT in source.restored
    assert sorted(read) == sorted([changed.name, "new.json", "unreadable.json"])
    assert warm == _cold(project)


def test_two_report_files_of_one_task_are_read_again_not_put_back(project: Path) -> None:
    """The State holds one report a task (the last file read): a checkpoint must not
    put that report back under the other file's name (found in review: a warm start
    showed a deleted file's verdict under the file left)."""
    gates = SddPaths(project).gates_dir
    (gates / "a.json").write_text(json.dumps({"task_id": "T-dup", "overall_pass": True}))
    (gates / "b.json").write_text(json.dumps({"task_id": "T-dup", "overall_pass": False}))
    _checkpointed(project)
    (gates / "b.json").unlink()
    source, warm = _warm(project)
    assert warm == _cold(project)
    assert source.state.gate_reports["T-dup"].overall_pass is True
    assert Kind.GATE_REPORT in source.restored  # (the others still come back)


def test_a_ticket_is_parsed_again_only_when_its_file_changed(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backlog = SddPaths(project).backlog_open
    changed = sorted(p for p in backlog.iterdir() if p.suffix == ".yaml")[1]
    (backlog / "broken.yaml").write_text("title: [unclosed\n")  # a problem: never kept
    _checkpointed(project)
    changed.write_text(changed.read_text().replace("title:", "title: Changed", 1))
    parsed: list[str] = []
    real = source_module.parse_ticket
    monkeypatch.setattr(source_module, "parse_ticket",
                        lambda data, display: parsed.append(display) or real(data, display))
    source, warm = _warm(project)
    assert Kind.TICKET in source.restored
    assert sorted(parsed) == sorted(SddPaths(project).display(p) for p in (changed,
                                                                         backlog / "broken.yaml"))
    assert warm == _cold(project)
    assert any(p[0].endswith("broken.yaml") for p in warm["problems"])


def test_only_files_their_listing_gives_are_put_back(project: Path) -> None:
    """The checkpoint's names (sealed by us, but first written by the project) are
    looked up by the names a listing of the directory gives; no path is made from them,
    so a name outside the directory, hidden or of another suffix is never put back,
    whatever signature it holds."""
    from console.sdd.checkpoint_files import SavedReport

    cold = LocalSource(project, checkpoint_after=None)
    cold.load()
    some = next(iter(cold.state.gate_reports.values()))
    sdd = SddPaths(project)
    odd = {".sdd/runtime/gates/../../../outside.json": project.parent / "outside.json",
           ".sdd/runtime/gates/.hidden.json": sdd.gates_dir / ".hidden.json",
           ".sdd/other/x.json": sdd.sdd / "other" / "x.json",
           ".sdd/runtime/gates/x.txt": sdd.gates_dir / "x.txt"}
    saved = {}
    for display, path in odd.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        info = os.stat(path)
        saved[display] = SavedReport(display, file_signature(info), some)
    fresh = LocalSource(project, checkpoint_after=None)
    fresh.saved_files[Kind.GATE_REPORT] = saved
    fresh.load()
    assert Kind.GATE_REPORT not in fresh.restored
    assert fresh.state.gate_report_files() == cold.state.gate_report_files()
    assert fresh.saved_files == {}  # (what a listing did not take is dropped)


def _damage(root: Path, how: str) -> None:
    path = SddPaths(root).checkpoint
    data = bytearray(path.read_bytes())
    head = len(checkpoint.MAGIC) + 32
    if how == "a flipped byte":
        data[len(data) // 2] ^= 0x40
    elif how == "cut short":
        del data[len(data) // 2:]
    elif how == "another version":  # the same body, sealed for another schema
        key = sealed.user_key(create=False)
        assert key is not None
        body = bytes(data[head:])
        data[len(checkpoint.MAGIC):head] = sealed.mac(key, body, b"other" + checkpoint.SCHEMA)
    elif how == "another user's key":
        sealed.key_path().write_bytes(os.urandom(32))
    elif how == "not a checkpoint":
        data[:] = b"\x93\x01\x02\x03" * 100
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["a flipped byte", "cut short", "another version",
                                 "another user's key", "not a checkpoint"])
def test_a_checkpoint_not_ours_as_written_is_ignored(project: Path, how: str) -> None:
    _checkpointed(project)
    _damage(project, how)
    source, warm = _warm(project)
    assert source.restored == frozenset()
    assert warm == _cold(project)


def test_no_checkpoint_is_written_through_a_link(project: Path, tmp_path: Path) -> None:
    """The checkpoints' directory (this user's cache) that is a link is not written
    through: nothing lands where it points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    directory = SddPaths(project).checkpoint.parent
    directory.parent.mkdir(parents=True)
    directory.symlink_to(outside)
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    assert not source.save_checkpoint(force=True)
    assert list(outside.iterdir()) == []


def test_the_checkpoint_is_this_users_keyed_by_the_real_path(project: Path,
                                                             tmp_path: Path) -> None:
    """One file a project in $XDG_CACHE_HOME/bernstein-tui/checkpoints/, named by the
    sha256 of its real path (a link to the project finds the same one), private to this
    user; nothing of it in the project."""
    link = tmp_path / "link-to-project"
    link.symlink_to(project)
    _checkpointed(link)
    real = hashlib.sha256(os.fsencode(os.path.realpath(project))).hexdigest()
    path = Path(os.environ["XDG_CACHE_HOME"]) / "bernstein-tui" / "checkpoints" / (
        real + ".ckpt")
    assert SddPaths(project).checkpoint == SddPaths(link).checkpoint == path
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not (project / ".sdd" / "caching" / "console").exists()
    assert _warm(project)[0].restored


def test_a_small_project_gets_no_checkpoint(project: Path) -> None:
    """Below CHECKPOINT_AFTER_BYTES read, a cold read is fast enough: nothing written."""
    source = LocalSource(project)
    source.load()
    assert not source.save_checkpoint()
    assert not SddPaths(project).checkpoint.exists()


def test_status_json_starts_from_the_checkpoint(project: Path, tmp_path: Path) -> None:
    """status --json reads the checkpoint: one sealed with our key over a State that
    says something the files do not is what it reports (and a cold read is not)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state-home")}
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    task = next(t for t in source.state.tasks.values() if t.status == "open")
    source.state.restore_tasks({task.id: replace(task, status="cancelled")})  # (only in
    # the checkpoint)
    assert source.save_checkpoint(force=True)

    def status() -> dict[str, Any]:
        out = subprocess.run([sys.executable, "-m", "console", "-C", str(project), "status",
                              "--json"], capture_output=True, text=True, env=env, check=True)
        return json.loads(out.stdout)

    warm = status()
    SddPaths(project).checkpoint.unlink()
    cold = status()
    assert warm["tasks"]["by_state"].get("cancelled", 0) == cold["tasks"]["by_state"].get(
        "cancelled", 0) + 1


def test_a_file_changed_between_its_read_and_the_save_is_not_kept(project: Path) -> None:
    """The checkpoint never pairs a file's State with bytes it was not read from."""
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    path = project / ".sdd" / GATES
    data = bytearray(path.read_bytes())
    at = data.rindex(b'"lint"')
    data[at:at + 6] = b'"lInt"'
    with open(path, "r+b") as handle:  # same inode, same size, rewritten near its end
        handle.write(data)
    assert source.save_checkpoint(force=True)
    warm_source, warm = _warm(project)
    assert Kind.GATE_LINES not in warm_source.restored and Kind.TASKS in warm_source.restored
    assert warm == _cold(project)


def test_the_watcher_checkpoints_what_it_read_when_it_stops(project: Path) -> None:
    """On quit the watcher thread writes it (never the console's event loop)."""
    source = LocalSource(project, checkpoint_after=1 << 40)  # not after the load
    source.start(lambda delta: None)
    assert source.loaded.wait(30)
    assert not SddPaths(project).checkpoint.exists()
    source.checkpoint_after = 0
    source.stop(timeout=30)
    assert SddPaths(project).checkpoint.is_file()
    assert _warm(project)[0].restored


def test_the_cache_keeps_recent_checkpoints_within_its_size(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other projects' checkpoints not written for KEEP_DAYS go, then the oldest past
    KEEP_BYTES; a crashed write's temporary file goes after an hour; the one just
    written stays."""
    _checkpointed(project)
    directory = SddPaths(project).checkpoint.parent
    now = time.time()
    for name, size, age in [("old.ckpt", 10, 31 * 86400), ("recent-a.ckpt", 100, 10),
                            ("recent-b.ckpt", 100, 20), (".x.ckpt.1.tmp", 10, 7200),
                            (".y.ckpt.2.tmp", 10, 60)]:
        (directory / name).write_bytes(b"x" * size)
        os.utime(directory / name, (now - age, now - age))
    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 150)
    source = LocalSource(project, checkpoint_after=0)
    source.load()
    assert source.save_checkpoint(force=True)
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [".y.ckpt.2.tmp", "recent-a.ckpt", SddPaths(project).checkpoint.name])
