"""Every text command on hostile data (issue #16 part 1), as a real subprocess: what
it prints holds no ESC and no other control character, the corpus is shown as
visible escapes, and the exit code is the normal one. `status --json` and
`proposals --json` are JSON: they parse."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from console.sdd.trust import trust
from tests.bernstein_server import FakeBernstein
from tests.conftest import REPO, run_cli
from tests.engine_kit import assert_idle_exit, git, make_repo, ticket
from tests.security.display_kit import (
    EVIL,
    HOSTILE,
    MARKUP_ID,
    TASK_ID,
    assert_text_only,
    write_hostile_project,
)

NOW = 1_800_000_000.0
ARGV_EVIL = EVIL.replace("\x00", "")  # argv cannot carry NUL


def _clean(result: subprocess.CompletedProcess[str], where: str) -> None:
    assert "Traceback" not in result.stderr, (where, result.stderr)
    assert_text_only(result.stdout, f"{where} stdout")
    assert_text_only(result.stderr, f"{where} stderr")


def test_status_and_proposals_print_the_corpus_as_text(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=NOW)
    status = run_cli("-C", str(tmp_path), "status")
    assert status.returncode == 0, status.stderr
    _clean(status, "status")
    assert "\\x1b]52;c;" in status.stdout and "problems:" in status.stdout
    as_json = run_cli("-C", str(tmp_path), "status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    _clean(as_json, "status --json")  # C1, bidi and surrogates as JSON \u escapes
    summary = json.loads(as_json.stdout)
    assert summary["tasks"]["total"] >= 4
    proposals = run_cli("-C", str(tmp_path), "proposals")
    assert proposals.returncode == 0, proposals.stderr
    _clean(proposals, "proposals")
    assert "EVO-[/]" in proposals.stdout  # markup in an id is shown as written
    rows_json = run_cli("-C", str(tmp_path), "proposals", "--json")
    _clean(rows_json, "proposals --json")
    rows = json.loads(rows_json.stdout)
    assert {"EVO-[/]", f"EVO-{EVIL}"} <= {row["proposal_id"] for row in rows}


def test_actions_on_hostile_ids_say_one_clean_line(tmp_path: Path) -> None:
    write_hostile_project(tmp_path, now=NOW)
    trust(tmp_path)  # approve runs code: only on a trusted project (its refusal: test_trust_*)
    runs = {
        "retry markup id": run_cli("-C", str(tmp_path), "retry", MARKUP_ID),
        "retry hostile id": run_cli("-C", str(tmp_path), "retry", ARGV_EVIL),
        "escalate hostile id": run_cli("-C", str(tmp_path), "escalate", ARGV_EVIL),
        "cancel hostile id": run_cli("-C", str(tmp_path), "cancel", f"{ARGV_EVIL}[/]"),
        "approve hostile proposal": run_cli("-C", str(tmp_path), "approve", ARGV_EVIL,
                                            "--reason", ARGV_EVIL),
        "reject markup proposal": run_cli("-C", str(tmp_path), "reject", "EVO-[/]",
                                          "--reason", ARGV_EVIL),
    }
    for where, result in runs.items():
        assert result.returncode in (0, 1), (where, result.returncode, result.stderr)
        _clean(result, where)
        said = (result.stdout + result.stderr).strip()
        assert said and len(said.splitlines()) == 1, (where, said)
    assert "\\x1b" in runs["retry hostile id"].stderr  # the id is named, escaped
    # main()'s one-line error: a hostile directory name
    missing = run_cli("-C", str(tmp_path / f"nowhere{ARGV_EVIL}"), "status")
    assert missing.returncode == 2
    _clean(missing, "bad -C")
    assert len(missing.stderr.strip().splitlines()) == 1


EVIL_GATE = f'''
EVIL = {EVIL!r}


class EvilGate:
    name = "evil"
    required = True
    condition = "always"

    def run(self, changed_files, run_dir, task_title, task_description):
        return {{"status": "fail", "details": EVIL}}
'''


def test_gates_prints_hostile_gate_output_as_text(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "bernstein.yaml").write_text(
        "quality_gates:\n  pipeline:\n    - {name: evil, required: true, condition: always}\n")
    (root / ".bernstein" / "gates").mkdir(parents=True)
    (root / ".bernstein" / "gates" / "evil.py").write_text(EVIL_GATE)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init")
    (root / "changed.txt").write_text("x\n")
    _trust(root)
    result = run_cli("-C", str(root), "gates", timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr  # the required gate fails
    _clean(result, "gates")
    assert "\\x1b" in result.stdout  # the tool output is shown, escaped (not obeyed)


AGENT = textwrap.dedent(f"""
    import sys
    sys.stdin.read()
    sys.stdout.write({EVIL!r} + "\\n")
    sys.stdout.write({EVIL!r}.replace("\\n", " ").replace("\\r", " ").replace("\\u2028", " "))
    sys.stdout.flush()
    sys.exit(1)
    """)


def hostile_run_repo(tmp_path: Path) -> Path:
    """A git repo whose ticket title and agent output are the corpus."""
    root = make_repo(tmp_path)
    agent = tmp_path / "evil_agent.py"
    agent.write_text(AGENT)
    (root / "bernstein.yaml").write_text(
        f"agents:\n  script:\n    command: [{json.dumps(sys.executable)}, "
        f"{json.dumps(str(agent))}]\n  kill_grace_s: 0.5\n"
        "cascade:\n  max_attempts: 1\n")
    ticket(root, "evil", id="T-run", title=f"{HOSTILE['markup_close']} {EVIL}",
           description=EVIL, role="backend")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "hostile ticket")
    _trust(root)
    return root


def test_run_until_idle_prints_hostile_titles_and_agent_output_as_text(
        tmp_path: Path) -> None:
    root = hostile_run_repo(tmp_path)
    result = run_cli("-C", str(root), "run", "--until-idle", "--workers", "1", timeout=120)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    _clean(result, "run --until-idle")
    assert "\\x1b]52;c;" in result.stdout  # the title, and the agent's last line, escaped


def test_server_output_and_errors_are_text(tmp_path: Path) -> None:
    server = FakeBernstein(token=None).start()
    try:
        server.add(EVIL, id="srv-1", role=EVIL)
        server.add("[/]", id="srv-[/]", status="failed")
        status = run_cli("--server", server.url, "status")
        assert status.returncode == 0, status.stderr
        _clean(status, "--server status")
        server.inject("POST", "/tasks/srv-1/cancel", 500, f"[/] {EVIL}")
        cancel = run_cli("--server", server.url, "cancel", "srv-1")
        assert cancel.returncode in (1, 2), cancel.stderr
        _clean(cancel, "--server cancel (a 500 with markup and escapes)")
        assert "[/]" in cancel.stderr and len(cancel.stderr.strip().splitlines()) == 1
    finally:
        server.stop()


def _trust(root: Path) -> None:
    """Run project code only once trusted: `trust` where the build has the command."""
    probe = run_cli("--help")
    if " trust" in probe.stdout:
        result = run_cli("-C", str(root), "trust")
        assert result.returncode == 0, result.stderr


def test_the_sanitiser_is_cheap_to_import() -> None:
    """sdd layer, stdlib only at import: every text command loads it."""
    code = ("import sys, console.sdd.sanitize\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('rich', 'textual', 'yaml', 'httpx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_the_hostile_fixture_is_read(tmp_path: Path) -> None:
    """The corpus really reaches the State (a test of the other tests' premise)."""
    from console.sdd.source import LocalSource

    write_hostile_project(tmp_path, now=NOW)
    source = LocalSource(tmp_path)
    source.load()
    state = source.state
    assert {TASK_ID, MARKUP_ID} <= set(state.tasks)
    assert EVIL in state.tasks[TASK_ID].title
    assert state.gate_reports[TASK_ID].results[0].details == EVIL
    assert state.problems  # the unreadable lines are problems, with their reasons
