"""#21 through the engine, with stand-ins for the three CLIs (tests/agents/fake_cli.py:
the real CLIs' flags, refusals and JSON output): each adapter's task starts on its own
ladder, its tokens (and claude's own cost) come from the CLI's report, its final
message is the one the checks read (stderr noise saying "I'm not sure" is not), a
missing login is one line and not escalated, and a pin meant for another vendor is
refused before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.engine.cascade import DEFAULT_PRICES
from tests.conftest import trusted
from tests.engine_kit import assert_idle_exit, git, make_repo, tasks, ticket

FAKE = Path(__file__).parent / "agents" / "fake_cli.py"


def _bin(tmp_path: Path) -> Path:
    """claude, codex and gemini on a PATH of their own: the stand-in under each name."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("claude", "codex", "gemini"):
        path = directory / name
        path.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        path.chmod(0o755)
    return directory


def _chains(root: Path) -> dict[str, dict]:
    lines = (root / ".sdd/metrics/cascade_chains.jsonl").read_text().splitlines()
    return {c["task_id"]: c for c in map(json.loads, lines)}


def test_each_adapter_runs_on_its_ladder_and_reports_its_usage(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="quality_gates: {enabled: false}\n"
                                      "complexity: {iterations: {simple: 1}}\n")
    config = root / "bernstein.yaml"  # codex's key, passed as an operator lists it
    config.write_text(config.read_text().replace("env: [", "env: [OPENAI_API_KEY, "))
    trusted(root)
    for cli in ("claude", "codex", "gemini"):
        ticket(root, cli, id=cli.upper(), title=f"Write with {cli}", cli=cli, scope="small",
               complexity="low", description=f"write out/{cli}.txt from {cli}")
    ticket(root, "unsure", id="UNSURE", title="Unsure on haiku", cli="claude", scope="small",
           complexity="low", description="write out/unsure.txt x\nunsure-on haiku")
    ticket(root, "pin", id="PIN", title="Pinned to a claude model", cli="codex",
           model="opus", scope="small", complexity="low", description="write out/pin.txt x")
    ticket(root, "nologin", id="NOLOGIN", title="No credentials", cli="gemini",
           scope="small", complexity="low", description="nologin")
    env = {**os.environ, "PATH": f"{_bin(tmp_path)}{os.pathsep}{os.environ['PATH']}",
           "OPENAI_API_KEY": "sk-test"}
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle", "--workers", "3"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    state, chains = tasks(root), _chains(root)
    for cli, first in (("claude", "haiku"), ("codex", "gpt-6-luna"), ("gemini", "flash-lite")):
        task = state[cli.upper()]
        assert task.status == "done", (cli, task.result_summary)
        assert git(root, "show", f"main:out/{cli}.txt") == f"from {cli}\n"
        [attempt] = chains[cli.upper()]["attempts"]
        assert attempt["model"] == first  # the adapter's own ladder, not haiku for all
        assert attempt["final_message"] == f"Done on {first}: wrote out/{cli}.txt."
        assert task.metadata["adapter"] == cli
    claude, codex, gemini = (chains[k]["attempts"][0] for k in ("CLAUDE", "CODEX", "GEMINI"))
    assert (claude["tokens_in"], claude["tokens_out"]) == (2000, 80)
    assert claude["cost_usd"] == 0.0123  # its own figure, not the price table's
    assert (codex["tokens_in"], codex["tokens_out"]) == (4000, 1000)
    price_in, price_out = DEFAULT_PRICES["gpt-6-luna"]
    assert codex["cost_usd"] == round((4000 * price_in + 1000 * price_out) / 1e6, 6)
    assert (gemini["tokens_in"], gemini["tokens_out"]) == (3000, 500)
    assert gemini["cost_usd"] == round((3000 * 0.1 + 500 * 0.4) / 1e6, 6)  # flash-lite
    unsure = chains["UNSURE"]["attempts"]
    assert [a["model"] for a in unsure] == ["haiku", "sonnet"]  # its last word, not noise
    assert unsure[0]["escalation_reason"].startswith("low-confidence output")
    assert state["PIN"].status == "failed" and len(chains["PIN"]["attempts"]) == 1
    assert state["PIN"].result_summary.startswith(
        "model opus is a claude model; adapter codex runs its own (gpt-6-luna")
    nologin = state["NOLOGIN"]
    assert nologin.status == "failed" and len(chains["NOLOGIN"]["attempts"]) == 1
    assert nologin.result_summary.startswith("adapter gemini is not logged in (Please set "
                                             "an Auth method")
    assert "GEMINI_API_KEY under agents.env" in nologin.result_summary
