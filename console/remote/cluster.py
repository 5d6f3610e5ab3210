"""A Bernstein 3.23.0 task server as a cluster worker speaks to it (`bernstein worker`'s
protocol, read from its source): `POST /cluster/nodes` to join, `…/heartbeat` with the
node's capacity (404/410: the server forgot the node; join again), `GET
/tasks/next/{role}?claimed_by_session=<node id>` (it returns *and claims* the next task
whose dependencies are done; 404: none), `/tasks/{id}/progress|complete|fail|release`,
`POST /agents/{session}/heartbeat`, `DELETE /cluster/nodes/{id}` to leave.

The claim carries the node id as `claimed_by_session`: the server's node reaper puts a
node's claims back to open when its heartbeats stop (BERNSTEIN_CLUSTER_NODE_TIMEOUT_S),
and the unregister route does the same at once. A server that refuses node registration
(an older one) is used with plain claims: the worker's own session id is the claim owner.

Every answer is data: a claimed task is decoded by the one task reader (`decode_task`)
and a node's fields are checked before use.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from console.model import Task
from console.remote.client import ServerClient, ServerError
from console.remote.health import decode_node
from console.remote.source import normalise_task
from console.sdd.fields import RecordError
from console.sdd.task_codec import decode_task

#: what the server accepts as claimed_by_session (its `_checked_claim_session`)
_SESSION = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _seg(value: str) -> str:
    """One path segment, whatever the data holds (ids come from the server)."""
    return quote(value, safe="")


def capacity(slots: int, busy: int) -> dict[str, Any]:
    """A NodeCapacity body."""
    return {"max_agents": slots, "active_agents": busy,
            "available_slots": max(0, slots - busy), "gpu_available": False,
            "supported_models": []}


class ClusterClient:
    """The routes a worker uses, on one `ServerClient` (its token, tenant and TLS)."""

    def __init__(self, client: ServerClient, *, name: str, identity: str) -> None:
        self.client = client
        self.name = name
        self.identity = identity  # the node's `url`: a restart re-registers as the same node
        self.node_id: str | None = None

    @property
    def url(self) -> str:
        return self.client.url

    def owner(self, fallback: str) -> str:
        """Who claims: the node id once joined, else the worker's own session."""
        return self.node_id or fallback

    # -- membership --------------------------------------------------------------------

    def join(self, slots: int, busy: int) -> str | None:
        """Register (or re-register) the node; its id, or None when the server has no
        node registry for us (404/405: plain claims then). ServerError otherwise."""
        try:
            body = self.client.request("POST", "/cluster/nodes", body={
                "name": self.name, "url": self.identity, "capacity": capacity(slots, busy),
                "labels": {"agent": "bernstein-tui"}, "cell_ids": []})
        except ServerError as exc:
            if exc.status in (404, 405):
                self.node_id = None
                return None
            raise
        node = decode_node(body)
        if node is None or not _SESSION.fullmatch(node.node_id):  # answered: not "away"
            raise ServerError(f"POST {self.client.where('/cluster/nodes')}: the answer "
                              "names no usable node id", status=201)
        self.node_id = node.node_id
        return self.node_id

    def heartbeat(self, slots: int, busy: int) -> bool:
        """False when the server no longer knows the node (join again)."""
        if self.node_id is None:
            return True
        try:
            self.client.request("POST", f"/cluster/nodes/{self.node_id}/heartbeat",
                                body={"capacity": capacity(slots, busy)})
        except ServerError as exc:
            if exc.status in (404, 410):
                return False
            raise
        return True

    def leave(self) -> None:
        """Unregister; the server reopens whatever the node still held."""
        if self.node_id is None:
            return
        try:
            self.client.request("DELETE", f"/cluster/nodes/{self.node_id}", ok=(200, 204))
        except ServerError as exc:
            if exc.status != 404:
                raise
        self.node_id = None

    # -- tasks -------------------------------------------------------------------------

    def next_task(self, role: str, owner: str) -> Task | None:
        """Claim the next task of `role` for `owner`; None when there is none (404)."""
        path = f"/tasks/next/{_seg(role)}"
        try:
            body = self.client.request("GET", path, params={"claimed_by_session": owner})
        except ServerError as exc:
            if exc.status == 404:
                return None
            raise
        try:
            return decode_task(normalise_task(body) if isinstance(body, dict) else {})
        except RecordError as exc:
            task_id = body.get("id") if isinstance(body, dict) else None
            if isinstance(task_id, str):  # claimed for nothing: given back at once
                self.release(task_id, f"the worker cannot read this task: {exc}")
            raise ServerError(f"GET {self.client.where(path)}: the claimed task cannot be "
                              f"read: {exc}", status=200) from None

    def open_roles(self) -> set[str]:
        """The roles of the open tasks (what `next` may be asked for)."""
        records, _ = self.client.tasks_page(limit=500, offset=0, status="open")
        return {str(r["role"])[:64] for r in records
                if isinstance(r, dict) and isinstance(r.get("role"), str)}

    def unfinished(self, roles: set[str] | None) -> int:
        """Tasks of these roles (all roles: None) that may still need a worker: open,
        claimed or in progress (one a worker holds may be given back)."""
        count = 0
        for status in ("open", "claimed", "in_progress"):
            records, _ = self.client.tasks_page(limit=500, offset=0, status=status)
            count += sum(1 for r in records if isinstance(r, dict) and
                         (roles is None or r.get("role") in roles))
        return count

    def progress(self, task_id: str, message: str, percent: int) -> None:
        self.client.request("POST", f"/tasks/{_seg(task_id)}/progress",
                            body={"message": message[:2000], "percent": percent})

    def complete(self, task_id: str, summary: str, branch: str | None,
                 sha: str | None) -> None:
        body: dict[str, Any] = {"result_summary": summary[:8000] or "done"}
        if branch and sha:
            body.update(agent_branch=branch, agent_sha=sha)
        self._terminal(task_id, "complete", body)

    def fail(self, task_id: str, reason: str) -> None:
        self._terminal(task_id, "fail", {"reason": reason[:4000] or "failed"})

    def release(self, task_id: str, reason: str) -> None:
        self._terminal(task_id, "release", {"reason": reason[:2000]})

    def _terminal(self, task_id: str, verb: str, body: dict[str, Any]) -> None:
        """409 (already in that state, or moved on by someone else) is no error here:
        the report is idempotent from the worker's side."""
        try:
            self.client.request("POST", f"/tasks/{_seg(task_id)}/{verb}", body=body)
        except ServerError as exc:
            if exc.status != 409:
                raise

    def agent_heartbeat(self, session: str, role: str) -> None:
        self.client.request("POST", f"/agents/{_seg(session)}/heartbeat",
                            body={"role": role, "status": "working"})
