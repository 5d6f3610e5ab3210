"""Issue #16 part 3: parsers with limits. A few hundred bytes of YAML aliases stand for
billions of values; the loader measures the expanded size before building anything,
and every "got X" message formats a bounded part of X (the full repr of such a value
is gigabytes). How long the refusal takes is a benchmark figure, not asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from console.sdd.fields import RecordError, brief, opt_str
from console.sdd.gate_config import GateConfigError, parse_quality_gates
from console.sdd.project_config import ConfigError, load_config
from console.sdd.safe_yaml import MAX_YAML_NODES, YamlLimitError, expanded_size, load_yaml
from console.sdd.tickets import TicketError, parse_ticket
from tests.conftest import run_cli
from tests.security.hostile_server import alias_bomb


def test_the_alias_bomb_is_a_few_hundred_bytes_standing_for_billions() -> None:
    text = alias_bomb()
    assert len(text.encode()) < 500
    composed = yaml.compose(text, Loader=yaml.SafeLoader)
    with pytest.raises(YamlLimitError):
        expanded_size(composed)
    assert expanded_size(composed, limit=10**12) > 9 ** 8  # what the limit stands between


def test_the_loader_refuses_the_bomb_and_self_containing_aliases() -> None:
    with pytest.raises(YamlLimitError, match=f"aliases expand to more than {MAX_YAML_NODES} "
                                             r"values \(line \d+\)"):
        load_yaml(alias_bomb())
    for recursive in ("a: &a [1, *a]", "&a {x: *a}"):
        with pytest.raises(YamlLimitError, match="refers to a value that contains it"):
            load_yaml(recursive)
    with pytest.raises(YamlLimitError, match="over the limit"):
        load_yaml("x: " + "y" * (2 * 1024 * 1024))


def test_ordinary_aliases_and_merge_keys_still_load() -> None:
    text = ("defaults: &d {role: backend, tags: [a, b]}\n"
            "one: {<<: *d, title: One}\ntwo: [*d, *d]\nplain: no alias here\n")
    assert load_yaml(text) == {
        "defaults": {"role": "backend", "tags": ["a", "b"]},
        "one": {"role": "backend", "tags": ["a", "b"], "title": "One"},
        "two": [{"role": "backend", "tags": ["a", "b"]}] * 2, "plain": "no alias here"}
    assert load_yaml("") is None and load_yaml("just: text") == {"just": "text"}


@pytest.mark.parametrize("form", ["yaml", "front-matter"])
def test_a_bomb_ticket_is_refused_with_one_line(form: str) -> None:
    text = alias_bomb()
    if form == "front-matter":
        text = "---\n" + text + "---\n# A heading Bernstein would fall back to\n"
    result = parse_ticket(text.encode(), ".sdd/backlog/open/bomb.yaml")
    assert isinstance(result, TicketError)
    assert "aliases expand to more than" in result.reason and "\n" not in result.reason
    assert len(result.reason) < 200


def test_status_names_the_bomb_ticket_and_goes_on(project: Path) -> None:
    open_dir = project / ".sdd" / "backlog" / "open"
    (open_dir / "bomb.yaml").write_text(alias_bomb(levels=10))  # 9**10 values
    (open_dir / "good.yaml").write_text("title: A good ticket\nrole: backend\n")
    out = run_cli("-C", str(project), "status", "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["backlog"]["open"] == 1  # the good ticket is still read
    [problem] = [p for p in summary["problems"] if p["file"].endswith("bomb.yaml")]
    assert problem["reason"].startswith("YAML refused: aliases expand to more than")
    text = run_cli("-C", str(project), "status", timeout=60)
    assert text.returncode == 0 and "bomb.yaml" in text.stdout


def test_a_bomb_in_bernstein_yaml_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bernstein.yaml").write_text(alias_bomb(key="quality_gates"))
    with pytest.raises(ConfigError, match=r"^bernstein\.yaml refused: aliases expand"):
        load_config(tmp_path)


def nested(levels: int) -> list[object]:
    """What an alias bomb loads as: lists sharing one list, `9**levels` leaves."""
    value: list[object] = ["lol"] * 9
    for _ in range(levels):
        value = [value] * 9
    return value


def test_bad_values_are_shown_through_a_bounded_repr() -> None:
    huge = nested(12)  # 9**13 leaves: its repr would be terabytes
    shown = brief(huge)
    assert shown.startswith("[[[[...], [...]") and shown.endswith("...") and len(shown) == 40
    assert len(brief(huge, 200)) <= 200
    assert brief("x" * 10**6).endswith("...") and len(brief("x" * 10**6)) == 40
    assert brief(10 ** 5000) == "<int>"  # past Python's int-to-text limit: no ValueError
    with pytest.raises(RecordError) as caught:
        opt_str({"role": huge}, "role")
    assert str(caught.value).startswith("field 'role': expected a string, got [[[[")
    assert len(str(caught.value)) < 100
    with pytest.raises(GateConfigError) as gate:
        parse_quality_gates({"enabled": huge})
    assert len(str(gate.value)) < 120 and "must be true or false" in str(gate.value)
