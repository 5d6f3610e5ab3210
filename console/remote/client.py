"""HTTP to a Bernstein task server: auth headers, the routes, and the limits every
request is held to (`console.remote.limits`: a total deadline, a body cap, bounded paging).

Every failure becomes a `ServerError` whose message is one line naming the URL
and saying what happened in an operator's words ("token rejected", "server
draining", "answer of N bytes refused"; `console.remote.answers`), never a
traceback. The bearer token lives only in the httpx client's headers: it is in no
repr, no message and no log line of ours.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from console.remote.answers import detail_of, meaning, retry_after_of, transport_meaning
from console.remote.bounded import Deadline, LimitExceeded, bounded_lines, read_body, shut
from console.remote.limits import (
    CONNECT_S,
    MAX_ERROR_BODY_BYTES,
    MAX_EVENT_SKIP_BYTES,
    MAX_REMOTE_TASKS,
    MAX_SYNC_BYTES,
    PAGE,
    PAGING_MARGIN,
    STREAM_READ_S,
    max_body_bytes,
    request_deadline_s,
)
from console.sdd.confine import safe_id


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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ServerClient:
    """One Bernstein task server; thread-safe (httpx.Client is).

    Every request is held to the limits in `console.remote.limits`: a total deadline
    (`timeout`, connect to last body byte) and a body cap (`max_body`). Connections are
    not kept alive between requests, so each request's socket is its own to cut."""

    def __init__(self, url: str, *, token: str | None = None, tenant: str | None = None,
                 verify: bool = True, timeout: float | None = None,
                 max_body: int | None = None) -> None:
        self.url = normalise_url(url)
        self.tenant = tenant
        self.verify = verify
        self.timeout = timeout if timeout is not None else request_deadline_s()
        self.max_body = max_body if max_body is not None else max_body_bytes()
        self.has_token = bool(token)
        self.last_latency_ms: float | None = None
        headers = {"Accept": "application/json", "Accept-Encoding": "identity",
                   "User-Agent": "bernstein-tui"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if tenant:
            headers["X-Tenant-ID"] = tenant
        self._http = httpx.Client(
            base_url=self.url, headers=headers, verify=verify, follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, CONNECT_S)))

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
        return self._fetch(method, path, body=body, params=params, ok=ok)[0]

    def _fetch(self, method: str, path: str, *, body: Any = None,
               params: dict[str, Any] | None = None, ok: tuple[int, ...] = (200, 201)
               ) -> tuple[Any, int]:
        """(the decoded JSON answer, its size in bytes), within the deadline and body cap."""
        started = time.perf_counter()
        with Deadline(self.timeout) as deadline:
            try:
                with self._http.stream(method, path, json=body, params=params,
                                       timeout=deadline.timeouts(CONNECT_S),
                                       extensions={"trace": deadline.trace}) as response:
                    if response.status_code not in ok:
                        raise self._refusal(method, path, response, deadline)
                    raw = read_body(response, self.max_body, deadline)
            except httpx.HTTPError as exc:
                raise ServerError(f"{self.where(path)}: " + transport_meaning(
                    exc, deadline.seconds, deadline.passed())) from None
            except LimitExceeded as exc:
                raise ServerError(f"{method} {self.where(path)}: {exc}") from None
            finally:
                self.last_latency_ms = (time.perf_counter() - started) * 1000
        if not raw:
            return None, 0
        try:
            return json.loads(raw), len(raw)
        except (ValueError, RecursionError):
            raise ServerError(f"{self.where(path)}: answered {response.status_code} with "
                              "something that is not JSON (is this a Bernstein task server?)",
                              status=response.status_code) from None

    def _refusal(self, method: str, path: str, response: httpx.Response,
                 deadline: Deadline) -> ServerError:
        """A non-success answer as a ServerError; only the start of its body is read."""
        raw = read_body(response, MAX_ERROR_BODY_BYTES, deadline, truncate=True)
        retry_after = retry_after_of(response)
        return ServerError(
            f"{method} {self.where(path)}: "
            + meaning(response.status_code, detail_of(raw), retry_after,
                      token_sent=self.has_token),
            status=response.status_code, retry_after=retry_after)

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
        return {str(k)[:100]: v for k, v in raw.items() if _is_int(v)}

    def tasks_page(self, *, limit: int | None = None, offset: int | None = None,
                   status: str | None = None) -> tuple[list[Any], int | None]:
        """One `GET /tasks`: (records, total). The server answers a bare list without
        paging parameters and `{tasks, total, limit, offset}` with them; both are read
        (total None for the bare list: it is everything)."""
        records, total, _ = self._tasks_page(limit=limit, offset=offset, status=status)
        return records, total

    def _tasks_page(self, **params: Any) -> tuple[list[Any], int | None, int]:
        body, size = self._fetch("GET", "/tasks", params={k: v for k, v in params.items()
                                                          if v is not None} or None)
        if isinstance(body, list):
            return body, None, size
        if isinstance(body, dict) and isinstance(body.get("tasks"), list):
            total = body.get("total")
            return body["tasks"], total if _is_int(total) else None, size
        raise ServerError(f"{self.where('/tasks')}: expected a list of tasks or "
                          "{tasks, total, limit, offset}, got something else")

    def all_tasks(self) -> list[Any]:
        """Every task of this tenant, page by page, within limits: paging stops at the
        `total` the pages give, at what /tasks/counts reported plus PAGING_MARGIN (at most
        MAX_REMOTE_TASKS), and at a page that adds no task not seen before; pages over
        MAX_SYNC_BYTES together are refused. A task id seen twice is kept once."""
        records: list[Any] = []
        seen: set[str] = set()
        offset = read = 0
        bound: int | None = None
        while True:
            page, total, size = self._tasks_page(limit=PAGE, offset=offset)
            read += size
            fresh = 0
            for record in page:
                task_id = record.get("id") if isinstance(record, dict) else None
                if isinstance(task_id, str) and task_id in seen:
                    continue
                if isinstance(task_id, str):
                    seen.add(task_id)
                    fresh += 1
                records.append(record)  # one without an id is kept: its problem is shown
            offset += len(page)
            if total is None or not fresh or offset >= total:
                return records
            if read > MAX_SYNC_BYTES:
                raise ServerError(f"GET {self.where('/tasks')}: the task list is over "
                                  f"{MAX_SYNC_BYTES // 2**20} MB after {offset} tasks; refused")
            if bound is None:
                bound = self._paging_bound()
            if offset >= bound:
                return records

    def _paging_bound(self) -> int:
        """How many tasks paging may read: /tasks/counts' total plus PAGING_MARGIN."""
        try:
            reported = self.counts().get("total")
        except ServerError:
            reported = None
        if reported is None:
            return MAX_REMOTE_TASKS
        return min(max(0, reported) + PAGING_MARGIN, MAX_REMOTE_TASKS)

    def drain(self) -> dict[str, Any]:
        """`GET /drain`: {draining, active_agents}."""
        return self._expect(self.get("/drain"), dict, "/drain")

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

    def task_detail(self, task_id: str) -> dict[str, Any]:
        """Bernstein's dashboard view of one task: `progress_entries`, `log_tail` (the
        agent log's end), `agent_status`, beside the task itself."""
        path = f"/dashboard/tasks/{safe_id(task_id, 'task id')}"
        return self._expect(self.get(path), dict, path)

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
        """The lines of an SSE stream; ServerError when it cannot be opened. Opening it
        (connect, headers) is held to the request deadline; then each read to
        STREAM_READ_S and each line to MAX_EVENT_SKIP_BYTES (sse.py drops an event with a
        line over MAX_EVENT_LINE_BYTES)."""
        deadline = Deadline(self.timeout)
        try:
            with deadline, self._http.stream(
                    "GET", path, timeout=httpx.Timeout(
                        STREAM_READ_S, connect=min(deadline.remaining(), CONNECT_S)),
                    headers={"Accept": "text/event-stream"},
                    extensions={"trace": deadline.trace}) as response:
                try:
                    if response.status_code != 200:
                        raise self._refusal("GET", path, response, deadline)
                except LimitExceeded as exc:  # the refusal's body outlived the deadline
                    raise ServerError(f"GET {self.where(path)}: {exc}") from None
                kind = response.headers.get("content-type", "")
                if not kind.startswith("text/event-stream"):
                    raise ServerError(f"{self.where(path)}: not an event stream "
                                      f"(content-type {kind[:60] or 'missing'})", status=200)
                deadline.cancel()  # open: from here the stream's own limits hold
                yield StreamLines(response, self.where(path))
        except httpx.HTTPError as exc:
            raise ServerError(f"{self.where(path)}: " + transport_meaning(
                exc, deadline.seconds, deadline.expired)) from None


class StreamLines:
    """An open stream's lines; `abort()` (from any thread) ends a blocked read now."""

    def __init__(self, response: httpx.Response, where: str) -> None:
        self.response = response
        self.where = where

    def __iter__(self) -> Iterator[str]:
        try:
            yield from bounded_lines(self.response.iter_bytes(), MAX_EVENT_SKIP_BYTES,
                                     STREAM_READ_S)
        except httpx.HTTPError as exc:
            raise ServerError(f"{self.where}: {transport_meaning(exc, STREAM_READ_S)}"
                              ) from None
        except LimitExceeded as exc:
            raise ServerError(f"{self.where}: {exc}; the stream is reset") from None

    def abort(self) -> None:
        stream = self.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            shut(sock)
