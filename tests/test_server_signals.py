"""`cluster.server_signals` (#32): what "matches the allow-list" means for a command and
for a URL, one-line problems for bad values, and nothing honoured in an untrusted
project. The end-to-end proof is tests/security/test_cluster_signals.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.engine.cluster_signals import local_policy, screen, url_refusal
from console.model import CompletionSignal
from console.sdd.project_config import parse_config
from console.sdd.server_signals import parse_server_signals
from tests.conftest import trusted

POLICY, PROBLEMS = parse_server_signals({
    "commands": ["pytest -q", "make  'test all'"],
    "url_hosts": ["127.0.0.1:8000", "Staging.Example.COM.", "::1", "[::2]:9"]})


def test_good_entries_make_no_problem() -> None:
    assert PROBLEMS == []


@pytest.mark.parametrize(("server", "runs"), [
    ("pytest -q", "pytest -q"),
    ("  pytest   -q ", "pytest -q"),
    ("pytest '-q'", "pytest -q"),  # the same words
    ("make 'test all'", "make  'test all'"),  # what runs is the operator's text
    ("pytest -q; rm -rf ~", None),
    ("pytest -q && curl x", None),
    ("pytest", None),
    ("pytest -q -x", None),
    ("make test all", None),  # other words
    ("pytest '-q", None),  # does not split
])
def test_a_command_matches_only_an_entry_with_the_same_words(server: str, runs) -> None:
    assert POLICY.command(server) == runs


@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.1:8000/health", None),
    ("https://staging.example.com/x", None),
    ("http://STAGING.example.com.:8443/", None),  # the entry names no port: any port
    ("http://[::1]:5/", None),
    ("http://[::2]:9/", None),
    ("http://[::2]:10/", "host not in"),
    ("http://127.0.0.1:8001/", "host not in"),
    ("http://127.0.0.1/", "host not in"),  # port 80, not the listed 8000
    ("https://127.0.0.1:8000/", None),
    ("http://127.1:8000/", "host not in"),  # compared as written
    ("http://staging.example.com.evil.test/", "host not in"),
    ("http://user:pw@staging.example.com/", "user name or password"),
    ("http://staging.example.com\\@evil.test/", "user name or password"),
    ("file:///etc/passwd", "scheme file"),
    ("ftp://staging.example.com/", "scheme ftp"),
    ("staging.example.com/x", "scheme none"),
    ("http://[bad/", "host not in"),
    ("http://", "no host"),
])
def test_a_url_matches_on_scheme_host_and_listed_port(url: str, why) -> None:
    refusal = url_refusal(url, POLICY)
    assert (refusal is None) if why is None else (refusal is not None and why in refusal)


@pytest.mark.parametrize(("raw", "said"), [
    ("pytest", "'cluster.server_signals' must be a map"),
    ({"commands": "pytest -q"}, "'cluster.server_signals.commands' must be a list"),
    ({"commands": [1]}, "'cluster.server_signals.commands[0]' must be a non-empty string"),
    ({"commands": ["a 'b"]}, "'cluster.server_signals.commands[0]' is not a command"),
    ({"url_hosts": ["http://x"]}, "'cluster.server_signals.url_hosts[0]' 'http://x'"),
    ({"url_hosts": ["*.example.com"]}, "'cluster.server_signals.url_hosts[0]'"),
    ({"url_hosts": ["h:99999"]}, "'cluster.server_signals.url_hosts[0]'"),
    ({"url_hosts": ["a/b"]}, "'cluster.server_signals.url_hosts[0]'"),
    ({"hosts": []}, "unknown key 'cluster.server_signals.hosts'"),
])
def test_a_bad_value_is_one_line_and_allows_nothing(raw: object, said: str) -> None:
    policy, problems = parse_server_signals(raw)
    assert len(problems) == 1 and said in problems[0], problems
    assert "\n" not in problems[0]
    assert not policy.allows_any


def test_bernstein_yaml_reports_the_problems_by_key() -> None:
    config = parse_config({"cluster": {"server_signals": {"commands": ["ok"],
                                                          "url_hosts": [7]}, "x": 1}})
    assert [w.reason for w in config.warnings] == [
        "unknown key 'cluster.x' (ignored)",
        "'cluster.server_signals.url_hosts[0]' must be a non-empty string of at most 4096 "
        "characters (ignored)"]
    assert config.server_signals.command("ok") == "ok"
    assert not parse_config({}).server_signals.allows_any
    assert [w.reason for w in parse_config({"cluster": [1]}).warnings] == [
        "'cluster' must be a map (ignored)"]


def test_inert_signals_stay_and_unknown_kinds_are_dropped() -> None:
    signals = (CompletionSignal("path_exists", "a"), CompletionSignal("file_contains", "a :: b"),
               CompletionSignal("llm_review", "ok?"), CompletionSignal("shell", "id"),
               CompletionSignal("test_passes", "pytest -q"))
    kept, dropped = screen(signals, POLICY)
    assert [s.type for s in kept] == ["path_exists", "file_contains", "llm_review",
                                      "test_passes"]
    assert len(dropped) == 1 and dropped[0].startswith("shell 'id'")


def test_an_untrusted_project_allows_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "bernstein.yaml").write_text("cluster: {server_signals: {commands: [id]}}\n")
    assert not local_policy(root, POLICY, vouched=False).allows_any
    assert local_policy(trusted(root), POLICY, vouched=False) is POLICY


def test_trust_lists_what_a_task_server_may_run_on_this_worker(tmp_path: Path) -> None:
    """`trust` (and the trust dialog) name the commands and hosts a server may pick."""
    from console.sdd.trust import what_runs

    root = tmp_path / "p"
    root.mkdir()
    (root / "bernstein.yaml").write_text(
        "cluster: {server_signals: {commands: ['pytest  -q'], "
        "url_hosts: ['127.0.0.1:8000', 'ci.example.com']}}\n")
    lines = what_runs(root)
    assert "a task server's test_passes may run (cluster.server_signals): pytest  -q" in lines
    assert ("a task server's api_responds may fetch from (cluster.server_signals): "
            "127.0.0.1:8000") in lines
    assert ("a task server's api_responds may fetch from (cluster.server_signals): "
            "ci.example.com") in lines
