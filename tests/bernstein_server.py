"""A stand-in Bernstein task server on 127.0.0.1, for the remote tests.

It speaks the shapes documented in reference/bernstein-formats.md §5 and seen on
3.23.0 (reference/bernstein-observed.md): bearer auth (401 without a token, 403
with a wrong one; /health is public), `GET /tasks` as a bare list or, with
paging parameters, the `{tasks, total, limit, offset}` envelope, `/tasks/counts`,
`/tasks/archive`, `/tasks/{id}[/gates]`, `PATCH`, `cancel`, `fail`, batch-ops
retry, no `/tasks/{id}/retry` (404), approvals, drain, and the `/events` SSE
stream (`event:`/`data:` frames, `:` comments, heartbeats). A test can make the
next answer to a route a given error, mute events (as a slow reader loses them),
and drop every open stream mid-frame.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

COUNT_KEYS = ("open", "claimed", "in_progress", "done", "closed", "failed", "blocked",
              "cancelled", "planned", "pending_approval", "waiting_for_subtasks", "orphaned",
              "abandoned", "blocked_by_abandon", "blocked_by_failed_dep", "refused", "suspended")
PUBLIC = ("/health",)
#: 3.23.0's TaskCountsResponse is built without blocked_by_failed_dep: always 0 there,
#: while `total` counts those tasks
COUNTS_LEFT_OUT = ("blocked_by_failed_dep",)


def task_response(task_id: str, title: str, status: str = "open", **fields: Any
                  ) -> dict[str, Any]:
    """A TaskResponse with 3.23.0's keys."""
    task: dict[str, Any] = {
        "id": task_id, "title": title, "description": f"{title}.", "role": "backend",
        "tenant_id": "default", "priority": 2, "scope": "medium", "complexity": "medium",
        "eu_ai_act_risk": "limited", "approval_required": False, "risk_level": "medium",
        "estimated_minutes": 10, "status": status, "depends_on": [], "parent_task_id": None,
        "depends_on_repo": None, "owned_files": [], "assigned_agent": None,
        "result_summary": None, "cell_id": None, "repo": None, "task_type": "standard",
        "upgrade_details": None, "model": None, "effort": None, "cli": None,
        "batch_eligible": False, "completion_signals": [], "slack_context": None,
        "metadata": {}, "created_at": time.time(), "claimed_at": None, "completed_at": None,
        "closed_at": None, "deadline": None, "progress_log": [], "version": 1,
        "parent_session_id": None, "retry_count": 0, "max_retries": 3, "retry_delay_s": 0.0,
        "terminal_reason": None, "max_output_tokens": None, "meta_messages": [],
        "max_turns": None, "artifact_spec": {"kind": "code_diff", "canonicalisation": "",
                                             "criteria": [], "output_path": ""},
    }
    task.update(fields)
    return task


def serve(handler: type[BaseHTTPRequestHandler], name: str) -> ThreadingHTTPServer:
    """An HTTP server on a free port of 127.0.0.1, serving in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


class FakeBernstein:
    """The server's data and knobs; `url` once started."""

    def __init__(self, token: str | None = "test-token", *, strict_patch: bool = False,
                 heartbeat_s: float = 0.5, wrong_token_status: int = 403) -> None:
        self.token = token
        #: 403 "Invalid auth token" as first observed; 3.23.0 also answers 401
        #: "Invalid or expired authentication token"
        self.wrong_token_status = wrong_token_status
        self.strict_patch = strict_patch  # 1.9.3's PATCH: only role, priority, model
        self.heartbeat_s = heartbeat_s
        self.tasks: dict[str, dict[str, Any]] = {}
        self.gates: dict[str, dict[str, Any]] = {}
        self.archive: list[dict[str, Any]] = []
        self.approvals: dict[str, dict[str, Any]] = {}
        self.decided: dict[str, str] = {}
        self.draining = False
        self.logs: dict[str, str] = {}  # agent session -> its log (GET /dashboard/tasks/{id})
        #: `/status` agents.items (3.23: id, role, status, model, provider, task_ids,
        #: runtime_s, tokens_used, context_utilization_pct, cost_usd)
        self.agents: list[dict[str, Any]] = []
        self.muted = False  # mutations publish no event (a slow reader's lost events)
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # method, path+query, headers
        self.injected: dict[tuple[str, str], list[tuple[int, Any, dict[str, str]]]] = {}
        self.lock = threading.RLock()
        self._subscribers: list[queue.Queue[str | None]] = []
        self._closed = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.stream_connects = 0

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> FakeBernstein:
        fake = self

        class Handler(_Handler):
            server_state = fake

        self._server = serve(Handler, "fake-bernstein")
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._closed.set()
        self.drop_streams()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- data ------------------------------------------------------------------

    def add(self, title: str, status: str = "open", **fields: Any) -> str:
        task_id = fields.pop("id", None) or uuid.uuid4().hex[:12]
        with self.lock:
            self.tasks[task_id] = task_response(task_id, title, status, **fields)
        self.publish("task_update", {"id": task_id, "status": status})
        return task_id

    def mutate(self, task_id: str, **changes: Any) -> dict[str, Any]:
        with self.lock:
            task = self.tasks[task_id]
            task.update(changes)
            task["version"] += 1
            snapshot = dict(task)
        self.publish("task_update", {"id": task_id, "status": snapshot["status"]})
        return snapshot

    def counts(self) -> dict[str, int]:
        with self.lock:
            counts = dict.fromkeys(COUNT_KEYS, 0)
            for task in self.tasks.values():
                counts[task["status"]] = counts.get(task["status"], 0) + 1
            counts["total"] = len(self.tasks)
            for status in COUNTS_LEFT_OUT:  # 3.23.0's /tasks/counts never fills these in
                counts[status] = 0
            return counts

    def inject(self, method: str, path: str, status: int, detail: Any = "",
               headers: dict[str, str] | None = None) -> None:
        """The next `method path` answers `status {"detail": detail}`."""
        self.injected.setdefault((method, path), []).append((status, detail, headers or {}))

    def paths(self, method: str | None = None) -> list[str]:
        return [path for m, path, _ in self.requests if method is None or m == method]

    # -- events ----------------------------------------------------------------

    def publish(self, event: str, data: dict[str, Any]) -> None:
        if self.muted:
            return
        frame = f"event: {event}\ndata: {json.dumps(data)}\n\n"
        with self.lock:
            for subscriber in self._subscribers:
                subscriber.put(frame)

    def drop_streams(self) -> None:
        """Every open /events connection ends abruptly, in the middle of a frame."""
        with self.lock:
            for subscriber in self._subscribers:
                subscriber.put(None)

    def subscribers(self) -> int:
        with self.lock:
            return len(self._subscribers)


class _Handler(BaseHTTPRequestHandler):
    server_state: FakeBernstein
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing --------------------------------------------------------------

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        try:
            return json.loads(self.rfile.read(length))
        except ValueError:
            return None

    def _handle(self, method: str) -> None:
        fake = self.server_state
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        fake.requests.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}))
        body = self._body() if method in ("POST", "PATCH") else {}
        if path not in PUBLIC and fake.token is not None:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                return self._reply(401, {"detail": "Missing or invalid Authorization header"})
            if auth[len("Bearer "):] != fake.token:
                return self._reply(fake.wrong_token_status, {
                    "detail": "Invalid auth token" if fake.wrong_token_status == 403
                    else "Invalid or expired authentication token"})
        injected = fake.injected.get((method, path))
        if injected:
            status, detail, headers = injected.pop(0)
            return self._reply(status, {"detail": detail}, headers)
        if body is None:
            return self._reply(422, {"detail": [{"loc": ["body"], "msg": "invalid JSON",
                                                  "type": "json_invalid"}]})
        try:
            self._route(method, path, query, body)
        except KeyError as exc:
            self._reply(404, {"detail": f"Task '{exc.args[0]}' not found"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    # -- routes ----------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        fake = self.server_state
        task_route = re.fullmatch(r"/tasks/([0-9a-zA-Z_-]+)(?:/([a-z-]+))?", path)
        if method == "GET" and path == "/health":
            with fake.lock:
                n = len(fake.tasks)
            return self._reply(200, {"status": "ok", "uptime_s": 1.0, "task_count": n,
                                     "agent_count": 0, "task_queue_depth": 0,
                                     "is_readonly": False})
        if method == "GET" and path == "/events":
            return self._events()
        if method == "GET" and path == "/status":
            counts = fake.counts()
            return self._reply(200, {"total": counts["total"], "open": counts["open"],
                                     "claimed": counts["claimed"], "done": counts["done"],
                                     "failed": counts["failed"], "per_role": [],
                                     "agents": {"count": len(fake.agents),
                                                "items": list(fake.agents)}})
        if method == "GET" and path == "/tasks":
            with fake.lock:
                tasks = [dict(t) for t in fake.tasks.values()]
            if "status" in query:
                tasks = [t for t in tasks if t["status"] == query["status"][0]]
            if "limit" not in query and "offset" not in query:
                return self._reply(200, tasks)
            limit = min(500, int(query.get("limit", ["50"])[0]))
            offset = int(query.get("offset", ["0"])[0])
            return self._reply(200, {"tasks": tasks[offset:offset + limit],
                                     "total": len(tasks), "limit": limit, "offset": offset})
        if method == "GET" and path == "/tasks/counts":
            return self._reply(200, fake.counts())
        detail = re.fullmatch(r"/dashboard/tasks/([0-9a-zA-Z_-]+)", path)
        if method == "GET" and detail:  # as 3.23.0's routes/task_detail.py answers
            with fake.lock:
                task = fake.tasks.get(detail.group(1))
                if task is None:
                    return self._reply(404, {"detail": f"Task '{detail.group(1)}' not found"})
                agent = task.get("assigned_agent") or ""
                log = fake.logs.get(agent, "")
                return self._reply(200, {
                    "task": dict(task), "log_tail": log, "log_size": len(log.encode()),
                    "progress_entries": [
                        {"message": str(e.get("message", "")), "percent": int(e.get("percent", 0)),
                         "timestamp": float(e.get("timestamp", 0))}
                        for e in task.get("progress_log") or []],
                    "agent_status": "assigned" if agent else "", "artifacts": [],
                    "progress": None})
        if method == "GET" and path == "/tasks/archive":
            return self._reply(200, fake.archive[-int(query.get("limit", ["50"])[0]):])
        if method == "POST" and path == "/tasks":
            if not body.get("title") or not body.get("description"):
                return self._reply(422, {"detail": [{"loc": ["body", "title"],
                                                     "msg": "Field required"}]})
            task_id = fake.add(body["title"], **{k: v for k, v in body.items()
                                                 if k not in ("title", "status")})
            return self._reply(201, fake.tasks[task_id])
        if method == "POST" and path == "/tasks/batch-ops":
            return self._batch_ops(body)
        if method == "GET" and path == "/approvals":
            with fake.lock:
                return self._reply(200, {"pending": list(fake.approvals.values())})
        approval = re.fullmatch(r"/approvals/([^/]+)/(approve|reject)", path)
        if method == "POST" and approval:
            task_id, verb = approval.groups()
            with fake.lock:
                if fake.approvals.pop(task_id, None) is None:
                    return self._reply(404, {"detail": f"No pending approval for task "
                                                       f"{task_id}"})
                fake.decided[task_id] = verb
            status = "approved" if verb == "approve" else "rejected"
            return self._reply(200, {"status": status, "task_id": task_id})
        if method == "GET" and path == "/drain":
            with fake.lock:
                claimed = sum(t["status"] == "claimed" for t in fake.tasks.values())
            return self._reply(200, {"draining": fake.draining, "active_agents": claimed})
        if path in ("/drain", "/drain/cancel") and method == "POST":
            fake.draining = path == "/drain"
            return self._reply(200, {"status": "draining" if fake.draining else "cancelled"})
        if task_route and task_route.group(1) not in ("counts", "archive", "batch-ops"):
            return self._task_route(method, task_route.group(1), task_route.group(2), body)
        self._reply(404 if method in ("GET", "POST", "PATCH") else 405,
                    {"detail": "Not Found"})

    def _task_route(self, method: str, task_id: str, action: str | None, body: Any) -> None:
        fake = self.server_state
        if action is None and method == "GET":
            with fake.lock:
                return self._reply(200, dict(fake.tasks[task_id]))
        if action == "gates" and method == "GET":
            fake.tasks[task_id]  # a KeyError: 404 for an unknown task
            if task_id not in fake.gates:
                return self._reply(404, {"detail": f"Gate report for task '{task_id}' "
                                                   "not found"})
            return self._reply(200, fake.gates[task_id])
        if action is None and method == "PATCH":
            allowed = {"role", "priority", "model"} if fake.strict_patch else {
                "role", "priority", "model", "cli", "meta_messages", "escalation_ladder_step",
                "escalation_ladder_attempts"}
            extra = set(body) - allowed
            if extra and fake.strict_patch:
                return self._reply(422, {"detail": [{"loc": ["body", sorted(extra)[0]],
                                                     "msg": "Extra inputs are not permitted",
                                                     "type": "extra_forbidden"}]})
            changes = {k: v for k, v in body.items() if k in ("role", "priority", "model")}
            task = fake.mutate(task_id, **changes)
            if "escalation_ladder_step" in body:
                with fake.lock:
                    step = body["escalation_ladder_step"]
                    fake.tasks[task_id]["metadata"] = {**task["metadata"],
                                                       "escalation_ladder_step": step}
                    task = dict(fake.tasks[task_id])
            return self._reply(200, task)
        if method != "POST":
            return self._reply(405, {"detail": "Method Not Allowed"})
        if action == "cancel":
            fake.tasks[task_id]  # a KeyError: 404 for an unknown task
            return self._reply(200, fake.mutate(task_id, status="cancelled",
                                                result_summary=body.get("reason") or None))
        if action == "fail":
            return self._reply(200, fake.mutate(task_id, status="failed",
                                                result_summary=body.get("reason", "")))
        if action == "claim":
            if fake.draining:
                return self._reply(503, {"detail": "Server is draining -- no new claims "
                                                   "accepted"})
            if fake.tasks[task_id]["status"] != "open":
                return self._reply(409, {"detail": f"task {task_id} is not open"})
            return self._reply(200, fake.mutate(task_id, status="claimed",
                                                claimed_at=time.time()))
        if action == "complete":
            return self._reply(200, fake.mutate(task_id, status="done",
                                                result_summary=body.get("result_summary"),
                                                completed_at=time.time()))
        # there is no /tasks/{id}/retry (nor /escalate): FastAPI's plain 404
        self._reply(404, {"detail": "Not Found"})

    def _batch_ops(self, body: Any) -> None:
        fake = self.server_state
        action, ids = body.get("action"), body.get("ids")
        if action not in ("cancel", "retry", "reprioritize", "tag") or not isinstance(ids, list):
            return self._reply(422, {"detail": [{"loc": ["body", "action"],
                                                 "msg": "Input should be 'cancel', 'retry', "
                                                        "'reprioritize' or 'tag'"}]})
        succeeded, failed = [], {}
        for task_id in ids:
            with fake.lock:
                task = fake.tasks.get(task_id)
            if task is None:
                failed[task_id] = "not found"
            elif action == "retry" and task["status"] != "failed":
                failed[task_id] = (f"Task '{task_id}' is not in failed state "
                                   f"(current: {task['status']})")
            elif action == "retry":
                fake.mutate(task_id, status="open", retry_count=task["retry_count"] + 1,
                            result_summary=None)
                succeeded.append(task_id)
            elif action == "cancel":
                fake.mutate(task_id, status="cancelled")
                succeeded.append(task_id)
            else:
                succeeded.append(task_id)
        self._reply(200, {"succeeded": succeeded, "failed": failed})

    def _events(self) -> None:
        fake = self.server_state
        subscriber: queue.Queue[str | None] = queue.Queue()
        with fake.lock:
            fake._subscribers.append(subscriber)
            fake.stream_connects += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'event: heartbeat\ndata: {"connected": true}\n\n: keepalive\n\n')
            self.wfile.flush()
            while not fake._closed.is_set():
                try:
                    frame = subscriber.get(timeout=fake.heartbeat_s)
                except queue.Empty:
                    frame = f'event: heartbeat\ndata: {{"ts": {time.time()}}}\n\n'
                if frame is None:  # dropped mid-frame: half an event, then the socket goes
                    self.wfile.write(b'event: task_update\ndata: {"id": "')
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    break
                self.wfile.write(frame.encode())
                self.wfile.flush()
        except OSError:
            pass
        finally:
            with fake.lock:
                fake._subscribers.remove(subscriber)
            self.close_connection = True
