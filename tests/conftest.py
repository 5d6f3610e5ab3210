from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

# The whole session (and every subprocess it starts) keeps its trust file and settings
# in a temporary config dir, never the user's ~/.config: set before anything reads it.
CONFIG_HOME = Path(tempfile.mkdtemp(prefix="bernstein-tui-tests-config-"))
os.environ["XDG_CONFIG_HOME"] = str(CONFIG_HOME)
atexit.register(shutil.rmtree, CONFIG_HOME, ignore_errors=True)
# ... and the checkpoints the consoles and `status` runs write, never the user's ~/.cache
CACHE_HOME = Path(tempfile.mkdtemp(prefix="bernstein-tui-tests-cache-"))
os.environ["XDG_CACHE_HOME"] = str(CACHE_HOME)
atexit.register(shutil.rmtree, CACHE_HOME, ignore_errors=True)
# and their keys (each engine's control key, the checkpoint key) in a temporary state dir
STATE_HOME = Path(tempfile.mkdtemp(prefix="bernstein-tui-tests-state-"))
os.environ["XDG_STATE_HOME"] = str(STATE_HOME)
atexit.register(shutil.rmtree, STATE_HOME, ignore_errors=True)

from console.sdd.skeleton import init_project  # noqa: E402
from console.sdd.trust import trust  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def trusted(root: Path) -> Path:
    """Trust a project a test made, as the operator would (`bernstein-tui trust`)."""
    trust(root)
    return root


def task_record(task_id: str, status: str = "open", **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": task_id, "title": f"Task {task_id}", "description": "d", "role": "backend",
        "priority": 2, "status": status,
    }
    record.update(fields)
    return record


def append(path: Path, *records: dict[str, Any] | str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        for record in records:
            if isinstance(record, dict):
                handle.write((json.dumps(record) + "\n").encode())
            elif isinstance(record, str):
                handle.write(record.encode())
            else:
                handle.write(record)


def _drop_file_capabilities() -> None:
    """In the child: give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so file permissions
    apply even to root (prctl PR_CAPBSET_DROP; the exec then recomputes capabilities)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 60,
            unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("BERNSTEIN_TUI_DEBUG", None)
    drop = _drop_file_capabilities if unprivileged and os.geteuid() == 0 else None
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=env, preexec_fn=drop)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_project(tmp_path)
    return trusted(tmp_path)


@pytest.fixture(autouse=True)
def _private_settings(tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The console's remembered theme goes to a temp file, never ~/.config."""
    monkeypatch.setenv("BERNSTEIN_TUI_CONFIG",
                       str(tmp_path_factory.mktemp("settings") / "settings.json"))
