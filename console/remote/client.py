"""HTTP to a Bernstein task server: auth headers, timeouts, and what a refusal means.

Every failure becomes a `ServerError` whose message is one line naming the URL
and saying what happened in an operator's words ("token rejected", "server
draining"), never a traceback. The bearer token lives only in the httpx
client's headers: it is in no repr, no message and no log line of ours.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

#: seconds for one ordinary request (connect gets at most CONNECT_S of it)
DEFAULT_TIMEOUT_S = 10.0
CONNECT_S = 5.0
#: the /events stream: the server sends a heartbeat every 15 s, so 45 s of silence is a gap
STREAM_READ_S = 45.0
PAGE = 500  # the server's limit cap for GET /tasks


class ServerError(Exception):
    """A request that did not give what was asked; `str()` is the one line to show."""

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def unreachable(self) -> bool:
        return self.status is None


def normalise_url(url: str) -> str:
    """`http(s)://host[:port][/prefix]`, without a trailing slash; ValueError says why not."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--server {url}: expected http://HOST:PORT or https://HOST:PORT")
    if parts.username or parts.password:
        raise ValueError("--server: put no credentials in the URL; use --token-file or "
                         "BERNSTEIN_AUTH_TOKEN")
    if parts.query or parts.fragment:
        raise ValueError(f"--server {url}: a server URL has no query or fragment")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _detail(response: httpx.Response) -> str:
    """The server's `{"detail": …}` as one short line (or the body's start)."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip().splitlines()
        return text[0][:200] if text else ""
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):  # e.g. the empty-summary 422: {error, message, …}
        detail = detail.get("message") or detail.get("error") or json.dumps(detail)
    elif isinstance(detail, list):  # FastAPI validation errors: [{loc, msg, type}]
        detail = "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg', '')}"
            if isinstance(item, dict) else str(item) for item in detail[:3])
    return " ".join(str(detail).split())[:300]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def meaning(status: int, detail: str, retry_after: float | None = None, *,
            token_sent: bool = True) -> str:
    """What a refusal means for an operator (reference §5.1 status codes; 3.23.0 answers a
    wrong token with 401 "Invalid or expired authentication token", not 403)."""
    said = f" ({detail})" if detail else ""
    if status == 401 and token_sent:
        return ("token rejected (401)" + said + ": it must equal the BERNSTEIN_AUTH_TOKEN "
                "the server was started with")
    if status == 401:
        return ("token missing (401)" + said + ": pass --token-file or set "
                "BERNSTEIN_AUTH_TOKEN; the server must have had BERNSTEIN_AUTH_TOKEN set "
                "when it started, or every route answers 401")
    if status == 403:
        return "token rejected or tenant not allowed (403)" + said
    if status == 404:
        return "not found (404)" + said
    if status == 405:
        return "the server refuses writes (405, read-only server?)" + said
    if status == 409:
        return "task changed meanwhile (409)" + said
    if status == 413:
        return "request too large (413)" + said
    if status == 422:
        return "the server refused the request as invalid (422)" + said
    if status == 429:
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        return "rate limited by the server (429)" + said + wait
    if status == 503:
        return "server draining or not ready (503)" + said
    if status >= 500:
        return f"server error ({status})" + said
    return f"unexpected answer ({status})" + said


def _transport_meaning(exc: httpx.HTTPError, timeout: float) -> str:
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {min(timeout, CONNECT_S):g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if "certificate" in lowered or "ssl" in lowered:
        return ("TLS certificate not verified (" + text[:120] + "); --insecure skips the check "
                "if you trust this network")
    if isinstance(exc, httpx.ConnectError):
        if "refused" in lowered:
            return "connection refused"
        if "name or service" in lowered or "nodename" in lowered or "name resolution" in lowered:
            return "host not found"
        return f"cannot connect ({text[:120] or type(exc).__name__})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"connection dropped ({text[:120] or 'no reason given'})"
    return f"{type(exc).__name__}: {text[:160]}"


class ServerClient:
    """One Bernstein task server; thread-safe (httpx.Client is)."""

    def __init__(self, url: str, *, token: str | None = None, tenant: str | None = None,
                 verify: bool = True, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = normalise_url(url)
        self.tenant = tenant
        self.verify = verify
        self.timeout = timeout
        self.has_token = bool(token)
        self.last_latency_ms: float | None = None
        headers = {"Accept": "application/json", "User-Agent": "bernstein-tui"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if tenant:
            headers["X-Tenant-ID"] = tenant
        self._http = httpx.Client(
            base_url=self.url, headers=headers, verify=verify, follow_redirects=False,
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_S)))

    def __repr__(self) -> str:
        return f"ServerClient({self.url!r}, tenant={self.tenant!r}, token={self.has_token})"

    def close(self) -> None:
        self._http.close()

    def where(self, path: str) -> str:
        return self.url + path

    # -- requests --------------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None,
                params: dict[str, Any] | None = None, ok: tuple[int, ...] = (200, 201)
                ) -> Any:
        """The decoded JSON answer; ServerError (one line, naming the URL) otherwise."""
        started = time.perf_counter()
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise ServerError(f"{self.where(path)}: {_transport_meaning(exc, self.timeout)}"
                              ) from None
        finally:
            self.last_latency_ms = (time.perf_counter() - started) * 1000
        if response.status_code not in ok:
            retry_after = _retry_after(response)
            raise ServerError(
                f"{method} {self.where(path)}: "
                + meaning(response.status_code, _detail(response), retry_after,
                          token_sent=self.has_token),
                status=response.status_code, retry_after=retry_after)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ServerError(f"{self.where(path)}: answered {response.status_code} with "
                              "something that is not JSON (is this a Bernstein task server?)",
                              status=response.status_code) from None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items()
                                                 if v is not None} or None)

    def _expect(self, value: Any, kind: type, path: str) -> Any:
        if not isinstance(value, kind):
            raise ServerError(f"{self.where(path)}: expected a JSON "
                              f"{'object' if kind is dict else 'list'}, got "
                              f"{type(value).__name__} (is this a Bernstein task server?)")
        return value

    # -- reads -----------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._expect(self.get("/health"), dict, "/health")

    def status(self) -> dict[str, Any]:
        return self._expect(self.get("/status"), dict, "/status")

    def counts(self) -> dict[str, int]:
        raw = self._expect(self.get("/tasks/counts"), dict, "/tasks/counts")
        return {str(k): v for k, v in raw.items() if isinstance(v, int)
                and not isinstance(v, bool)}

    def tasks_page(self, *, limit: int | None = None, offset: int | None = None,
                   status: str | None = None) -> tuple[list[Any], int | None]:
        """One `GET /tasks`: (records, total). The server answers a bare list without
        paging parameters and `{tasks, total, limit, offset}` with them; both are read
        (total None for the bare list: it is everything)."""
        body = self.get("/tasks", limit=limit, offset=offset, status=status)
        if isinstance(body, list):
            return body, None
        if isinstance(body, dict) and isinstance(body.get("tasks"), list):
            total = body.get("total")
            return body["tasks"], total if isinstance(total, int) else None
        raise ServerError(f"{self.where('/tasks')}: expected a list of tasks or "
                          "{tasks, total, limit, offset}, got something else")

    def all_tasks(self) -> list[Any]:
        """Every task of this tenant, page by page."""
        records: list[Any] = []
        offset = 0
        while True:
            page, total = self.tasks_page(limit=PAGE, offset=offset)
            records.extend(page)
            offset += len(page)
            if total is None or not page or offset >= total:
                return records

    def task(self, task_id: str) -> dict[str, Any]:
        return self._expect(self.get(f"/tasks/{task_id}"), dict, f"/tasks/{task_id}")

    def gates(self, task_id: str) -> dict[str, Any] | None:
        """The task's gate report; None when it has none (404)."""
        try:
            return self._expect(self.get(f"/tasks/{task_id}/gates"), dict,
                                f"/tasks/{task_id}/gates")
        except ServerError as exc:
            if exc.status == 404:
                return None
            raise

    def archive(self, limit: int = 200) -> list[Any]:
        return self._expect(self.get("/tasks/archive", limit=limit), list, "/tasks/archive")

    def approvals(self) -> list[Any]:
        body = self._expect(self.get("/approvals"), dict, "/approvals")
        pending = body.get("pending", [])
        return pending if isinstance(pending, list) else []

    # -- writes ----------------------------------------------------------------

    def batch_ops(self, action: str, ids: list[str]) -> tuple[list[str], dict[str, str]]:
        body = self._expect(self.request("POST", "/tasks/batch-ops",
                                         body={"action": action, "ids": ids}),
                            dict, "/tasks/batch-ops")
        succeeded = [str(i) for i in body.get("succeeded") or []]
        failed = body.get("failed") or {}
        return succeeded, {str(k): str(v) for k, v in failed.items()} if isinstance(
            failed, dict) else {}

    def patch_task(self, task_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._expect(self.request("PATCH", f"/tasks/{task_id}", body=changes), dict,
                            f"/tasks/{task_id}")

    def cancel_task(self, task_id: str, reason: str) -> dict[str, Any]:
        return self._expect(self.request("POST", f"/tasks/{task_id}/cancel",
                                         body={"reason": reason}),
                            dict, f"/tasks/{task_id}/cancel")

    def resolve_approval(self, task_id: str, approve: bool, reason: str) -> dict[str, Any]:
        verb = "approve" if approve else "reject"
        return self._expect(self.request("POST", f"/approvals/{task_id}/{verb}",
                                         body={"reason": reason}),
                            dict, f"/approvals/{task_id}/{verb}")

    # -- the event stream ------------------------------------------------------

    @contextmanager
    def stream(self, path: str = "/events") -> Iterator[StreamLines]:
        """The lines of an SSE stream; ServerError when it cannot be opened."""
        timeout = httpx.Timeout(STREAM_READ_S, connect=min(self.timeout, CONNECT_S))
        try:
            with self._http.stream("GET", path, timeout=timeout,
                                   headers={"Accept": "text/event-stream"}) as response:
                if response.status_code != 200:
                    response.read()
                    retry_after = _retry_after(response)
                    raise ServerError(
                        f"GET {self.where(path)}: "
                        + meaning(response.status_code, _detail(response), retry_after,
                                  token_sent=self.has_token),
                        status=response.status_code, retry_after=retry_after)
                kind = response.headers.get("content-type", "")
                if not kind.startswith("text/event-stream"):
                    raise ServerError(f"{self.where(path)}: not an event stream "
                                      f"(content-type {kind or 'missing'})", status=200)
                yield StreamLines(response, self.where(path))
        except httpx.HTTPError as exc:
            raise ServerError(f"{self.where(path)}: "
                              f"{_transport_meaning(exc, STREAM_READ_S)}") from None


class StreamLines:
    """An open stream's lines; `abort()` (from any thread) ends a blocked read now."""

    def __init__(self, response: httpx.Response, where: str) -> None:
        self.response = response
        self.where = where

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self.response.iter_lines()
        except httpx.HTTPError as exc:
            raise ServerError(f"{self.where}: {_transport_meaning(exc, STREAM_READ_S)}"
                              ) from None

    def abort(self) -> None:
        stream = self.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)
