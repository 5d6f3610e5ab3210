"""The door `web` opens (issue #32.1, DESIGN §7 "Every new door is a trust boundary"):
local, and only for whoever holds this run's token.

- Loopback only, unless `--allow-remote` says otherwise (with a warning naming the risk).
- The listening sockets are bound before anything else starts, so a busy port is one line
  and exit 2, with no engine started and no banner printed.
- A per-run token (`secrets.token_urlsafe`, as Jupyter's) in the URL of every request
  but textual-serve's own static files (public: they ship in its package): the URL `web`
  prints carries it as `?token=`, and the page served for it carries it in the websocket
  URL it opens. No cookie: cookies do not tell ports apart (RFC 6265 §8.5) and SameSite
  ignores the port, so any other server on this machine's loopback would be sent it. The
  page is `Referrer-Policy: no-referrer` (its URL holds the token and it pulls a
  stylesheet from fonts.googleapis.com) and `Cache-Control: no-store`.
- The `Host` header must name the bound address, so a page under another name that
  resolves here (DNS rebinding) is refused: for a loopback bind any loopback name
  (127.0.0.1, localhost or [::1]) with any port, as an SSH tunnel or an editor's port
  forwarding from another local port sends; otherwise the bound name and port. The
  websocket's `Origin` must be `http://` + that Host: the page's own origin.
- At most `max_tabs` consoles at once.

Each refusal is one plain line (403; 503 for the cap) given before textual-serve's
handler runs, so no console process is started. textual-serve's own handlers serve what
passes (its websocket, downloads and static files); the page is rendered here, from its
template, with the websocket URL (and its token) on the name the browser used.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import os
import re
import secrets
import signal
import socket
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.errors import UsageError
from console.sdd.user_dirs import project_key

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Middleware
    from textual_serve.server import Server

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
TOKEN_PARAM = "token"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address literal (a name is not resolved: not loopback)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_name(host: str) -> str:
    """A host as it appears in a URL / a Host header: IPv6 literals in brackets."""
    host = host.lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listen(host: str, port: int) -> list[socket.socket]:
    """The listening sockets for host:port (every address the name gives). Done first, so
    a busy port or an address that is not this machine's is one line (UsageError)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: cannot resolve it ({exc.strerror})") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in {info[4]: info for info in infos}.values():
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is busy (another program listens "
                             f"there): choose another with --port") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sockets


def _split_host(header: str) -> tuple[str, str] | None:
    """A Host header as (name, port): `[v6]:port`, `[v6]`, `name:port` or `name`."""
    header = header.lower()
    if header.startswith("["):
        name, bracket, rest = header.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        return name + "]", rest[1:]
    name, _, port = header.partition(":")
    return None if ":" in port else (name, port)


@dataclass
class Door:
    """Who may come in: the token, the names the Host header may carry, the tab cap."""

    host: str
    port: int
    max_tabs: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    tabs: int = 0
    #: for a wildcard bind, this machine's names (looked up once, not per request)
    names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.host in WILDCARDS:
            self.names = frozenset({socket.gethostname().lower(), socket.getfqdn().lower(),
                                    "localhost"})

    @property
    def url(self) -> str:
        """The one URL `web` prints: the page, with the token."""
        name = socket.gethostname() if self.host in WILDCARDS else _url_name(self.host)
        return f"http://{name}:{self.port}/?{TOKEN_PARAM}={self.token}"

    def host_allowed(self, header: str) -> bool:
        """`Host` names the bound address: for a loopback bind any loopback name, with any
        port (an SSH tunnel or a port forward from another local port); otherwise the
        bound port, and for a wildcard bind this machine's name or an address literal,
        never another name."""
        parts = _split_host(header)
        if parts is None:
            return False
        name, port = parts
        if is_loopback(self.host):  # a tunnel or port forward may come from any port
            return name in LOOPBACK_NAMES and (port == "" or _a_port(port))
        if port != str(self.port) and not (port == "" and self.port == 80):
            return False
        if name == _url_name(self.host):
            return True
        if self.host not in WILDCARDS:
            return False
        if name in self.names:
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

    def token_ok(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())


def _a_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < int(text) < 65536


def _without_token(request: web.Request) -> tuple[str | None, web.Request]:
    """The token a request offers in its URL, and the request with it taken out.

    textual.js opens `<the page's websocket URL>?width=..&height=..`: on a URL that
    already has `?token=T` the size lands inside the token's value (`T?width=80`), so
    what follows a `?` there is put back as the query textual-serve reads."""
    from urllib.parse import parse_qsl

    offered = request.query.get(TOKEN_PARAM)
    if offered is None:
        return None, request
    offered, _, rest = offered.partition("?")
    query = [(k, v) for k, v in request.query.items() if k != TOKEN_PARAM]
    query += parse_qsl(rest, keep_blank_values=True)
    return offered, request.clone(rel_url=request.rel_url.with_query(query))


Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def _refuse(status: int, line: str) -> web.Response:
    from aiohttp import web

    return web.Response(status=status, text=f"bernstein-tui web: {line}\n")


def door_middleware(door: Door) -> Middleware:
    """Every request: Host, then the token; the websocket also Origin and the cap."""
    from aiohttp import web

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        if not door.host_allowed(host):
            return _refuse(403, "the Host header does not name the address this server "
                                "listens on")
        route = getattr(request.match_info.route, "name", None)
        if route == "static":  # textual-serve's own files, public in its package
            return await handler(request)
        offered, request = _without_token(request)
        if not door.token_ok(offered):
            return _refuse(403, "no valid token: open the URL (with ?token=) that "
                                "`bernstein-tui web` printed")
        if route == "websocket":
            if request.headers.get("Origin", "").lower() != f"http://{host.lower()}":
                return _refuse(403, "the websocket's Origin is not this server's page")
            if door.tabs >= door.max_tabs:
                return _refuse(503, f"{door.max_tabs} consoles are open already (the most "
                                    f"--max-tabs allows): close a tab first")
            door.tabs += 1
            try:
                return await handler(request)
            finally:
                door.tabs -= 1
        return await handler(request)

    return check


def build_app(server: Server, door: Door, title: str) -> web.Application:
    """textual-serve's routes behind the door, the page rendered for the name used."""
    from urllib.parse import urlencode

    import aiohttp_jinja2
    import jinja2
    from aiohttp import web

    async def index(request: web.Request) -> web.StreamResponse:
        try:
            font_size = max(6, min(64, int(request.query.get("fontsize", "16"))))
        except ValueError:
            font_size = 16
        origin = f"{request.host}"  # checked by the door: a name of the bound address
        socket_url = f"ws://{origin}/ws?{urlencode({TOKEN_PARAM: door.token})}"
        context = {"font_size": font_size, "app_websocket_url": socket_url,
                   "config": {"static": {"url": f"http://{origin}/static/"}},
                   "application": {"name": title}}
        page = aiohttp_jinja2.render_template("app_index.html", request, context)
        # its URL holds the token: never sent on (the template pulls a Google stylesheet)
        # nor kept in a cache
        page.headers["Referrer-Policy"] = "no-referrer"
        page.headers["Cache-Control"] = "no-store"
        return page

    app = web.Application(middlewares=[door_middleware(door)])
    aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(server.templates_path))
    app.add_routes([
        web.get("/", index, name="index"),
        web.get("/ws", server.handle_websocket, name="websocket"),
        web.get("/download/{key}", server.handle_download, name="download"),
        web.static("/static", server.statics_path, name="static"),
    ])
    return app


def serve(app: web.Application, sockets: list[socket.socket]) -> None:
    """Run until SIGINT/SIGTERM, on the sockets bound by `listen`."""
    import asyncio

    from aiohttp import web
    from aiohttp.web_runner import GracefulExit

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def leave() -> None:
        raise GracefulExit()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, leave)
    web.run_app(app, sock=sockets, handle_signals=False, loop=loop, print=None,
                access_log=None)


def web_home() -> Path:
    """This user's directory for `web` (0700): the engine logs, and the working directory
    of every process `web` starts (never the project: nothing is imported from it)."""
    from console.sdd.user_dirs import private_dir, user_state_dir

    return private_dir(user_state_dir() / "web")


def engine_log_path(project: Path) -> Path:
    """The engine log of a project, under the user's state directory, keyed by the
    project's real path (never in the project, where a planted link or FIFO waits)."""
    real = os.path.realpath(project)
    key = project_key(real)[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(real).name)[:40] or "project"
    return web_home() / f"{name}-{key}-engine.log"


def open_log(path: Path) -> int:
    """An fd appending to `path`: not following a link, not blocking on a FIFO, refused
    unless a regular file (OSError)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                 | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        raise
    return fd
