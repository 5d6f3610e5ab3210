"""What the console's header shows about a task server: its health (`ServerHealth`) and
its cluster nodes' load (`GET /cluster/nodes`, also how a worker reads its own
registration): data, checked field by field."""

from __future__ import annotations

import time
from dataclasses import dataclass

MAX_NODES = 1000
SHOWN = 6  # nodes named in the header; the rest are counted


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node: its name, state, tasks running / slots, and its last heartbeat."""

    node_id: str
    name: str
    status: str
    active: int
    slots: int
    last_heartbeat: float | None

    def label(self, now: float) -> str:
        beat = f" {max(0, now - self.last_heartbeat):.0f}s" if self.last_heartbeat else ""
        state = "" if self.status == "online" else f" {self.status}"
        return f"{self.name or self.node_id} {self.active}/{self.slots}{beat}{state}"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_node(raw: object) -> NodeLoad | None:
    """A NodeResponse, or None when it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    found = raw.get("capacity")
    capacity: dict = found if isinstance(found, dict) else {}
    beat = raw.get("last_heartbeat")
    return NodeLoad(str(raw["id"])[:64], str(raw.get("name") or "")[:80],
                    str(raw.get("status") or "unknown")[:20],
                    _int(capacity.get("active_agents")), _int(capacity.get("max_agents")),
                    float(beat) if isinstance(beat, int | float) and beat > 0 else None)


def decode_nodes(body: object) -> tuple[NodeLoad, ...]:
    if not isinstance(body, list):
        return ()
    return tuple(node for node in map(decode_node, body[:MAX_NODES]) if node is not None)


def workers_line(nodes: tuple[NodeLoad, ...], now: float | None = None) -> str:
    """`workers 2/3: w1 1/2 1s, w2 0/2 3s, w3 0/2 70s offline` ('' with no node)."""
    if not nodes:
        return ""
    now = time.time() if now is None else now
    online = sum(1 for n in nodes if n.status == "online")
    named = sorted(nodes, key=lambda n: (n.status != "online", n.name, n.node_id))[:SHOWN]
    more = f", +{len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
    return (f"workers {online}/{len(nodes)}: " + ", ".join(n.label(now) for n in named)
            + more)


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """What the header shows about the server."""

    url: str
    status: str = "unknown"  # the server's /health status (ok, degraded), or unreachable
    latency_ms: float | None = None  # the last request's round trip
    live: bool = False  # the /events stream is connected
    detail: str = ""  # why it is unreachable / the stream is down
    checked_at: float | None = None  # time.time() of the last /health answer
    draining: bool | None = None  # GET /drain; None: not known
    workers: tuple[NodeLoad, ...] = ()  # GET /cluster/nodes: per-worker load

    def line(self) -> str:
        latency = f"{self.latency_ms:.0f} ms" if self.latency_ms is not None else "- ms"
        drain = "  ‖ DRAINING (z resumes)" if self.draining else ""
        workers = workers_line(self.workers)
        return (f"{self.url}  {self.status}  {latency}  "
                f"events {'live' if self.live else 'down'}{drain}"
                + (f"  {workers}" if workers else ""))
