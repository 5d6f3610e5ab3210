"""`web` is a local, authenticated door (issue #32.1), end to end: the real
`bernstein-tui web` on a free port of 127.0.0.1, talked to as a hostile web page (no
token, another Origin, another Host: DNS rebinding), a greedy one (hundreds of tabs) and a
hostile repository (a `console/` package planted in it, a link planted where the engine
log used to be) would. Each refusal is one plain line, and no console process starts
for it: the web process's children are counted through /proc."""

from __future__ import annotations

import asyncio
import html
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
import pytest
import yaml

from console.sdd.skeleton import init_project
from tests.conftest import trusted
from tests.engine_kit import make_repo, until
from tests.test_web_browser import _children as _descendants
from tests.test_web_browser import _free_port

WAIT_S = 60.0
#: the terminal size a tab asks for (not textual-serve's default 80x24: seen to arrive)
SIZE = (101, 31)
ENTRY_POINT = Path(sys.executable).parent / "bernstein-tui"
PLANTED = """\
import pathlib, sys
with open({marker!r}, "a") as out:
    out.write(" ".join(sys.argv) + "\\n")
"""


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
               ) -> Path:
    """`web`'s own directory (engine log, working directory) in a temp state home."""
    home = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


@dataclass
class Web:
    process: subprocess.Popen[str]
    port: int
    url: str  # the one URL it printed, with the token

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]

    def consoles(self) -> list[str]:
        return [c for c in _descendants(self.process.pid).values() if "--no-engine" in c
                or ("-m console" in c and " run" not in c and " web" not in c)]

    def console_sizes(self) -> list[tuple[str, str]]:
        """(COLUMNS, ROWS) of each tab's console: the size its websocket asked for."""
        sizes = []
        for pid, cmd in _descendants(self.process.pid).items():
            if "--no-engine" in cmd:
                with suppress(OSError):
                    env = dict(item.split("=", 1) for item in Path(
                        f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
                    sizes.append((env.get("COLUMNS", ""), env.get("ROWS", "")))
        return sizes

    def engines(self) -> list[str]:
        return [c for c in _descendants(self.process.pid).values() if c.endswith(" run ")]


@contextmanager
def serving(root: Path, *flags: str, read_only: bool = False) -> Iterator[Web]:
    """`bernstein-tui web` started as an operator does (the entry point, in the
    project's directory), until it prints its URL; stopped (SIGTERM) after."""
    port = _free_port()
    process = subprocess.Popen([str(ENTRY_POINT), *(["--read-only"] if read_only else []),
                                "web", "--port", str(port), *flags],
                               cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()],
                     daemon=True).start()
    try:
        url = ""
        while not url:
            try:
                line = lines.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError("web printed no URL with a token") from None
            url = line.strip() if "token=" in line else ""

        def answers() -> bool:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                return True
            except httpx.HTTPError:
                return False

        until("web to answer", answers, WAIT_S)
        yield Web(process, port, url)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def _open_ws(web: Web, *, token: bool = True, cookie: bool = False,
                   origin: str | None = None, host: str | None = None
                   ) -> tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]:
    """A websocket to /ws as the page opens it: the URL the page names (with `token`: the
    page got through the printed URL; else a bare /ws), plus textual.js's own
    `?width=..&height=..`, and an Origin; with `cookie`, the token as the cookie the old
    door used. aiohttp.WSServerHandshakeError (with .status) when refused."""
    session = aiohttp.ClientSession()
    try:
        socket_url = f"ws://127.0.0.1:{web.port}/ws"
        if token:
            async with session.get(web.url) as page:
                assert page.status == 200
                socket_url = _socket_url(await page.text())
        headers = {"Origin": origin or web.base}
        if host is not None:
            headers["Host"] = host
        if cookie:
            headers["Cookie"] = f"bernstein_tui_web_{web.port}={web.token}"
        ws = await session.ws_connect(f"{socket_url}?width={SIZE[0]}&height={SIZE[1]}",
                                      headers=headers)
    except BaseException:
        await session.close()
        raise
    return session, ws


def _socket_url(page: str) -> str:
    """The websocket URL a page hands textual.js."""
    found = re.search(r'data-session-websocket-url="([^"]*)"', page)
    assert found, page[:2000]
    return html.unescape(found.group(1))


async def _first_bytes(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    """What a tab's console first sends (b"" if nothing comes: no console runs)."""
    try:
        message = await asyncio.wait_for(ws.receive(), 30)
    except TimeoutError:
        return b""
    return message.data if isinstance(message.data, bytes) else b""


async def _close(session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
    """Close a tab (not waiting forever for a server whose console already died)."""
    with suppress(TimeoutError):
        await asyncio.wait_for(ws.close(), 10)
    await session.close()


def _refused_ws(web: Web, **kwargs: object) -> int:
    async def attempt() -> int:
        try:
            session, ws = await _open_ws(web, **kwargs)  # type: ignore[arg-type]
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await _close(session, ws)
        return 101

    return asyncio.run(attempt())


@pytest.fixture
def watched(tmp_path: Path) -> Path:
    """A trusted project with nothing to do (web serves it --read-only: no engine)."""
    root = tmp_path / "project"
    init_project(root)
    return trusted(root)


def test_no_token_no_page_no_console(watched: Path) -> None:
    with serving(watched, read_only=True) as web:
        assert web.url.startswith(f"http://127.0.0.1:{web.port}/?token=")
        for url in (f"{web.base}/", f"{web.base}/?token=wrong", f"{web.base}/download/x"):
            answer = httpx.get(url, timeout=10)
            assert answer.status_code == 403, url
            assert answer.text.count("\n") == 1 and "token" in answer.text
        assert _refused_ws(web, token=False) == 403
        assert web.consoles() == []
        # textual-serve's own script and styles are public (they ship in its package)
        assert httpx.get(f"{web.base}/static/js/textual.js", timeout=10).status_code == 200
        page = httpx.get(web.url, timeout=10)  # the printed URL: the page
        assert page.status_code == 200
        assert _socket_url(page.text) == f"ws://127.0.0.1:{web.port}/ws?token={web.token}"
        assert web.consoles() == []


def test_the_token_as_a_cookie_opens_nothing(watched: Path) -> None:
    """Cookies do not tell ports apart: a page served by any other local server (another
    port of 127.0.0.1) is sent this host's cookies. So the page sets none, and the token
    as a cookie alone opens neither the page nor a console."""
    with serving(watched, read_only=True) as web:
        cookie = {"Cookie": f"bernstein_tui_web_{web.port}={web.token}"}
        answer = httpx.get(f"{web.base}/", headers=cookie, timeout=10)
        assert answer.status_code == 403 and "token" in answer.text
        assert _refused_ws(web, token=False, cookie=True) == 403
        assert web.consoles() == []
        page = httpx.get(web.url, timeout=10)
        assert page.status_code == 200
        assert "set-cookie" not in page.headers
        # the page's URL holds the token: sent to no one (the template pulls a stylesheet
        # from fonts.googleapis.com), kept in no cache
        assert page.headers["referrer-policy"] == "no-referrer"
        assert page.headers["cache-control"] == "no-store"


def test_websocket_from_another_origin_or_host_is_refused(watched: Path) -> None:
    with serving(watched, read_only=True) as web:
        # a hostile page the operator visits, the token learnt somehow: its Origin is not
        assert _refused_ws(web, origin="http://evil.example") == 403
        # DNS rebinding: evil.example resolved to 127.0.0.1, so page and socket agree
        rebound = f"evil.example:{web.port}"
        assert _refused_ws(web, origin=f"http://{rebound}", host=rebound) == 403
        answer = httpx.get(web.url, headers={"Host": rebound}, timeout=10)
        assert answer.status_code == 403 and "Host" in answer.text
        assert web.consoles() == []
        # localhost is this machine too
        assert _refused_ws(web, origin=f"http://localhost:{web.port}",
                           host=f"localhost:{web.port}") == 101


def test_a_tunnel_from_another_local_port_is_let_in(watched: Path) -> None:
    """`ssh -L 9000:127.0.0.1:<port>` (or an editor's port forwarding) sends Host
    127.0.0.1:9000: a loopback name, so in; a name that is not loopback, on any port,
    still out (DNS rebinding)."""
    with serving(watched, read_only=True) as web:
        other = _free_port()
        tunnel = f"127.0.0.1:{other}"
        page = httpx.get(web.url, headers={"Host": tunnel}, timeout=10)
        assert page.status_code == 200
        assert _socket_url(page.text) == f"ws://{tunnel}/ws?token={web.token}"
        assert _refused_ws(web, origin=f"http://{tunnel}", host=tunnel) == 101
        for rebound in (f"evil.example:{other}", f"evil.example:{web.port}", "evil.example"):
            answer = httpx.get(web.url, headers={"Host": rebound}, timeout=10)
            assert answer.status_code == 403 and "Host" in answer.text, rebound
            assert _refused_ws(web, origin=f"http://{rebound}", host=rebound) == 403
        # the Origin still has to be the page's: the tunnel's name and port
        assert _refused_ws(web, origin=f"http://127.0.0.1:{web.port}", host=tunnel) == 403


def test_the_token_opens_a_console_and_tabs_are_capped(watched: Path) -> None:
    with serving(watched, "--max-tabs", "2", read_only=True) as web:
        async def tabs() -> tuple[list[bytes], int]:
            opened = [await _open_ws(web) for _ in range(2)]
            try:
                first = []
                for _session, ws in opened:  # each tab's console draws something
                    first.append(await _first_bytes(ws))
                try:
                    session, ws = await _open_ws(web)
                    await _close(session, ws)
                    third = 101
                except aiohttp.WSServerHandshakeError as exc:
                    third = exc.status
                until("two consoles", lambda: len(web.consoles()) == 2, WAIT_S)
                # the size textual.js adds after the token in the URL reached textual-serve
                assert web.console_sizes() == [(str(SIZE[0]), str(SIZE[1]))] * 2
                return first, third
            finally:
                for session, ws in opened:
                    await _close(session, ws)

        first, third = asyncio.run(tabs())
        assert all(first), first
        assert third == 503
        until("the closed tabs' consoles to exit", lambda: web.consoles() == [], WAIT_S)


def test_non_loopback_host_needs_the_flag(watched: Path) -> None:
    port = _free_port()
    done = subprocess.run([str(ENTRY_POINT), "-C", str(watched), "--read-only", "web",
                           "--host", "0.0.0.0", "--port", str(port)], capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert "--allow-remote" in done.stderr and "0.0.0.0" in done.stderr
    with serving(watched, "--host", "0.0.0.0", "--allow-remote", read_only=True) as web:
        assert httpx.get(f"{web.base}/", timeout=10).status_code == 403  # the token holds
        assert _refused_ws(web, token=False) == 403
        # a bind that is not loopback keeps its port: Host names it
        answer = httpx.get(f"{web.base}/?token={web.token}",
                           headers={"Host": f"127.0.0.1:{_free_port()}"}, timeout=10)
        assert answer.status_code == 403 and "Host" in answer.text
    assert web.process.stderr is not None
    warning = web.process.stderr.read()
    assert "warning" in warning and "token" in warning and "SSH tunnel" in warning


def test_a_busy_port_is_one_line_and_starts_nothing(watched: Path, state_home: Path) -> None:
    runtime = watched / ".sdd" / "runtime"
    before = sorted(p.name for p in runtime.iterdir())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.Popen([str(ENTRY_POINT), "web", "--port", str(port)], cwd=watched,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = done.communicate(timeout=WAIT_S)
    assert done.returncode == 2, err
    assert out == "" and err.count("\n") == 1 and f"port {port}" in err and "busy" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in runtime.iterdir()) == before  # no engine: no lock, no log
    assert not (state_home / "bernstein-tui" / "web").exists() or \
        not list((state_home / "bernstein-tui" / "web").iterdir())


def test_a_planted_console_package_is_never_imported(tmp_path: Path) -> None:
    """The operator runs `bernstein-tui web` in a repository that carries a `console/`
    package: neither the engine `web` starts nor a tab's console imports it."""
    root = make_repo(tmp_path)  # a git repository: its engine runs until web stops
    marker = tmp_path / "imported"
    (root / "console").mkdir()
    (root / "console" / "__init__.py").write_text(PLANTED.format(marker=str(marker)))
    (root / "console" / "__main__.py").write_text("")
    trusted(root)
    with serving(root) as web:
        until("the engine", lambda: web.engines() or marker.exists(), WAIT_S)

        async def a_tab() -> bytes:
            session, ws = await _open_ws(web)
            try:
                return await _first_bytes(ws)
            finally:
                await _close(session, ws)

        drew = asyncio.run(a_tab())
        assert not marker.exists(), marker.read_text()
        assert drew  # a real console drew on the page
        assert web.engines()  # and the engine still runs


def test_the_demo_agent_imports_nothing_from_its_worktree(tmp_path: Path) -> None:
    """The demo's agent command (in the demo's bernstein.yaml) runs in an agent's
    worktree: a `console/` package there is not what it runs."""
    from console.demo.project import config

    command = yaml.safe_load(config(sys.executable))["agents"]["script"]["command"]
    marker = tmp_path / "imported"
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "__init__.py").write_text(PLANTED.format(marker=str(marker)))
    subprocess.run(command, cwd=tmp_path, input="{}", capture_output=True, text=True,
                   timeout=WAIT_S, env={**os.environ, "PYTHONPATH": ":"})
    assert not marker.exists(), marker.read_text()


def test_a_link_planted_at_the_old_engine_log_is_not_followed(tmp_path: Path,
                                                               state_home: Path) -> None:
    root = tmp_path / "project"
    init_project(root)
    trusted(root)
    outside = tmp_path / "outside.txt"
    (root / ".sdd" / "runtime" / "web-engine.log").symlink_to(outside)
    logs = state_home / "bernstein-tui" / "web"
    with serving(root) as web:
        until("the engine's first line in its log", lambda: outside.exists() or [
            log for log in logs.glob("project-*-engine.log") if log.read_bytes()], WAIT_S)
    assert not outside.exists(), outside.read_text()[:500]
    assert web.process.stderr is not None
    said = web.process.stderr.read()
    written = [log for log in logs.glob("project-*-engine.log") if log.read_bytes()]
    assert len(written) == 1 and str(written[0]) in said  # the banner says where it is


def test_the_engine_log_opener_follows_no_link_and_waits_on_no_fifo(tmp_path: Path) -> None:
    """The log in the user's state directory is opened the same careful way: a link or a
    FIFO put there is refused at once (a FIFO would block an ordinary open)."""
    from console.cli.web_door import open_log

    outside = tmp_path / "outside.txt"
    (tmp_path / "link.log").symlink_to(outside)
    os.mkfifo(tmp_path / "fifo.log")
    for planted in ("link.log", "fifo.log"):
        with pytest.raises(OSError):
            os.close(open_log(tmp_path / planted))
    assert not outside.exists()
    os.close(open_log(tmp_path / "plain.log"))
    assert (tmp_path / "plain.log").stat().st_mode & 0o777 == 0o600
