"""#19.10: `bernstein-tui --demo web` in a real headless Chromium (Debian's `chromium`,
driven by playwright-core from npm): the page loads, a task row arrives, a key press
reaches the app, every glyph the console draws has a glyph in the page's font, and
closing the page leaves no process; stopping `web` stops its one engine. The page is
opened through the URL with the token `web` prints (issue #32.1).

Skipped, saying what is missing, without Chromium or Node ≥ 20 and npm (.ci/run installs
Chromium with apt when it can)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from console.engine.lock import pid_alive
from console.model import GATE_GLYPHS, STATE_GLYPHS, UNKNOWN_STATE_GLYPH
from tests.conftest import REPO
from tests.engine_kit import until

PLAYWRIGHT = "playwright-core@1.64"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bernstein-tui" / \
    "playwright"
#: glyphs drawn outside the state and gate tables: header, SLA strip, missions, history
OTHER_GLYPHS = "‖◷↻⚠✓✗!…·→⇥▶"
WAIT_S = 90.0


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _node_ok() -> bool:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return False
    out = subprocess.run([node, "--version"], capture_output=True, text=True)
    try:
        return int(out.stdout.strip().lstrip("v").split(".")[0]) >= 20
    except ValueError:
        return False


@pytest.fixture(scope="module")
def driver() -> tuple[str, Path]:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("NO CHROMIUM: install Debian's chromium (apt-get install chromium; "
                    ".ci/run does) to run the browser test of `web`")
    if not _node_ok():
        pytest.skip("NO NODE >= 20 / npm: the browser test drives Chromium with "
                    "playwright-core from npm")
    if not (CACHE / "node_modules" / "playwright-core").is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE),
                        PLAYWRIGHT], check=True, capture_output=True, timeout=600)
    shutil.copy(REPO / "tests" / "web" / "drive.mjs", CACHE / "drive.mjs")
    return chromium, CACHE / "drive.mjs"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> dict[int, str]:
    """Live descendants of `pid` with their command lines."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
            lines[int(entry)] = cmd
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = lines[child]
                frontier.append(child)
    return found


def test_the_demo_in_a_real_browser(driver: tuple[str, Path], tmp_path: Path) -> None:
    chromium, script = driver
    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "console", "--demo", "web", "--port",
                            str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True, cwd=tmp_path)
    said: list[bytes] = []
    reader = threading.Thread(target=lambda: said.extend(web.stdout or ()), daemon=True)
    reader.start()
    try:
        # the one URL web prints carries this run's token (issue #32.1): the page puts
        # it in the websocket URL it opens (no cookie)
        url = until("web to print its URL", lambda: next((
            line.decode().strip() for line in list(said) if b"?token=" in line), None), WAIT_S)
        assert url.startswith(f"http://127.0.0.1:{port}/?token="), url
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 403

        def serving() -> bool:
            try:
                return httpx.get(url, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        until("web to serve its page", serving, WAIT_S)
        engines = {p: c for p, c in _children(web.pid).items() if " run" in c}
        assert len(engines) == 1, engines  # one engine for the project, started by web
        glyphs = "".join(sorted({*STATE_GLYPHS.values(), *GATE_GLYPHS.values(),
                                 UNKNOWN_STATE_GLYPH, *OTHER_GLYPHS}))
        shot = tmp_path / "page.png"
        drove = subprocess.run(["node", str(script), url, chromium, str(shot), glyphs],
                               capture_output=True, text=True, timeout=300,
                               cwd=script.parent)
        result = json.loads(drove.stdout.strip().splitlines()[-1])
        assert result["errors"] == [], result
        assert result["loaded"] and result["row"], result  # the page, then DEMO-01's row
        assert result["key"], result  # ? reached the app: its help screen came back
        assert result["missing"] == [], f"no glyph in the browser font: {result['missing']}"
        assert shot.stat().st_size > 10_000  # a drawn terminal, not a blank page
        # the page is closed: its console exits; the engine stays for the next tab
        until("the closed page's console to exit", lambda: not [
            c for c in _children(web.pid).values() if "--no-engine" in c], WAIT_S)
        assert all(pid_alive(pid) for pid in engines)
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=WAIT_S)
        reader.join(WAIT_S)
        output = b"".join(said)
        assert web.returncode == 0, output.decode(errors="replace")[-2000:]
        until("the engine to stop with web",
              lambda: not any(pid_alive(pid) for pid in engines), WAIT_S)
        assert b"Traceback" not in output
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
