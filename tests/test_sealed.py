"""A sealed file (sdd/sealed.py) is read back only as this user sealed it: read in
chunks while its MAC is computed, any change to any byte, a cut, another schema,
another key, a symbolic link or a size over the limit refuses it whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.sdd import sealed

MAGIC = b"TESTSEAL"
SCHEMA = b"schema 1"
BODY = bytes(range(256)) * 41 + b"tail"  # (10,500 bytes: many chunks of 1,000)


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    monkeypatch.setattr(sealed, "CHUNK_BYTES", 1000)


def _seal(path: Path, body: bytes = BODY, schema: bytes = SCHEMA) -> Path:
    key = sealed.user_key(create=True)
    assert key is not None
    path.write_bytes(MAGIC + sealed.mac(key, body, schema) + body)
    return path


def _read(path: Path, limit: int = 1 << 20) -> bytes | None:
    body = sealed.read_sealed(path, MAGIC, SCHEMA, limit)
    return None if body is None else bytes(body)


def test_what_was_sealed_reads_back_chunk_by_chunk(tmp_path: Path) -> None:
    path = _seal(tmp_path / "f")
    assert _read(path) == BODY
    assert (os.stat(sealed.key_path()).st_mode & 0o777) == 0o600


@pytest.mark.parametrize("where", [0, 3, len(MAGIC) + 5, len(MAGIC) + 40, 5000, -1])
def test_any_byte_changed_refuses_it(tmp_path: Path, where: int) -> None:
    path = _seal(tmp_path / "f")
    data = bytearray(path.read_bytes())
    data[where] ^= 0x01
    path.write_bytes(bytes(data))
    assert _read(path) is None


def test_cut_short_grown_or_over_the_limit_refuses_it(tmp_path: Path) -> None:
    path = _seal(tmp_path / "f")
    data = path.read_bytes()
    assert _read(path, limit=len(data) - 1) is None
    path.write_bytes(data[:-1])
    assert _read(path) is None
    path.write_bytes(data[:10])  # (shorter than the magic and the MAC)
    assert _read(path) is None
    path.write_bytes(data + b"x")
    assert _read(path) is None


def test_another_schema_key_or_a_link_refuses_it(tmp_path: Path) -> None:
    path = _seal(tmp_path / "f", schema=b"schema 2")
    assert _read(path) is None
    _seal(path)
    link = tmp_path / "link"
    link.symlink_to(path)
    assert _read(link) is None and _read(path) == BODY
    os.chmod(sealed.key_path(), 0o644)  # (a key others can read is no key)
    assert sealed.user_key(create=False) is None and _read(path) is None
    os.chmod(sealed.key_path(), 0o600)
    assert _read(path) == BODY
    sealed.key_path().write_bytes(os.urandom(32))
    assert _read(path) is None
