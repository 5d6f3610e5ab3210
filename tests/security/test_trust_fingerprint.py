"""What the trust hash covers (issue #15 part 2): names, kinds and contents under
`.bernstein/` in a stable order, never following a link or opening a FIFO; a
`.bernstein` that is itself a link is trusted as the link and never loaded."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from console.sdd.trust import fingerprint
from tests.conftest import run_cli
from tests.engine_kit import git
from tests.security.test_trust_cli import config_home  # noqa: F401 - the fixture


def _tree(root: Path, names: list[str]) -> Path:
    root.mkdir()
    (root / "bernstein.yaml").write_text("workers: 1\n")
    for name in names:  # written in the order given: the hash must not care
        path = root / ".bernstein" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
    return root


def test_the_hash_is_stable_and_sees_every_name_kind_and_byte(tmp_path: Path) -> None:
    names = ["gates/a.py", "gates/b.py", "notes/z.txt", "x"]
    first = _tree(tmp_path / "one", names)
    second = _tree(tmp_path / "two", list(reversed(names)))
    assert fingerprint(first) == fingerprint(second)  # same files, another path and order
    base = fingerprint(second).digest

    changes = [
        lambda r: (r / ".bernstein/gates/b.py").rename(r / ".bernstein/gates/c.py"),
        lambda r: (r / ".bernstein/x").chmod(0o755),
        lambda r: (r / ".bernstein/notes/z.txt").write_text("# z.txt \n"),
        lambda r: (r / ".bernstein/empty").mkdir(),
        lambda r: os.symlink("gates/a.py", r / ".bernstein/link.py"),
        lambda r: os.mkfifo(r / ".bernstein/pipe"),  # hashed by kind, never opened
        lambda r: (r / "bernstein.yaml").write_text("workers: 2\n"),
    ]
    seen = {base}
    for index, change in enumerate(changes):
        root = _tree(tmp_path / f"changed-{index}", names)
        change(root)
        done: list[str] = []
        worker = threading.Thread(target=lambda r=root, out=done: out.append(
            fingerprint(r).digest), daemon=True)
        worker.start()
        worker.join(30)
        assert done, f"change {index}: hashing hung"
        assert done[0] not in seen, f"change {index} was not seen"
        seen.add(done[0])


def test_a_linked_bernstein_dir_is_trusted_as_a_link_and_never_loaded(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("x\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "gates").mkdir(parents=True)
    marker = tmp_path / "imported"
    (elsewhere / "gates" / "sneaky.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    (root / ".bernstein").symlink_to(elsewhere)
    before = fingerprint(root)
    (elsewhere / "gates" / "more.py").write_text("")
    assert fingerprint(root) == before  # the link is what is hashed ...
    assert run_cli("-C", str(root), "trust").returncode == 0
    gates = run_cli("-C", str(root), "gates")
    assert gates.returncode == 2  # ... so the loader refuses to follow it
    assert gates.stderr.strip() == (f"bernstein-tui: {root}/.bernstein is a symbolic link; "
                                    "gate plugins must be files in the project itself")
    assert not marker.exists()


@pytest.mark.parametrize("size", [0, 1])
def test_an_empty_or_missing_config_still_has_a_hash(tmp_path: Path, size: int) -> None:
    root = tmp_path / "p"
    root.mkdir()
    missing = fingerprint(root)
    (root / "bernstein.yaml").write_text("\n" * size)
    assert fingerprint(root) != missing  # creating bernstein.yaml later untrusts it
