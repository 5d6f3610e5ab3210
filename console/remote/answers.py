"""What a task server's answer means, in an operator's words: a refusal's status code
and detail, its Retry-After, a transport failure. Each is one short line."""

from __future__ import annotations

import json

import httpx

from console.remote.limits import CONNECT_S, MAX_RETRY_AFTER_S


def detail_of(raw: bytes) -> str:
    """The server's `{"detail": …}` as one short line (or the body's start)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        text = raw.decode("utf-8", "replace").strip().splitlines()
        return " ".join(text[0].split())[:200] if text else ""
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):  # e.g. the empty-summary 422: {error, message, …}
        detail = detail.get("message") or detail.get("error") or json.dumps(detail)[:300]
    elif isinstance(detail, list):  # FastAPI validation errors: [{loc, msg, type}]
        detail = "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', [])[1:4])}: {str(item.get('msg'))[:100]}"
            if isinstance(item, dict) else str(item)[:100] for item in detail[:3])
    return " ".join(str(detail)[:600].split())[:300]


def retry_after_of(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or not seconds >= 0:  # NaN, negative
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


_PLAIN = {
    403: "token rejected or tenant not allowed (403)",
    404: "not found (404)",
    405: "the server refuses writes (405, read-only server?)",
    413: "request too large (413)",
    422: "the server refused the request as invalid (422)",
    503: "server draining or not ready (503)",
}


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
    if status == 409:
        return conflict_meaning(detail) + said
    if status in _PLAIN:
        return _PLAIN[status] + said
    if status == 429:
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        return "rate limited by the server (429)" + said + wait
    if status >= 500:
        return f"server error ({status})" + said
    return f"unexpected answer ({status})" + said


def conflict_meaning(detail: str) -> str:
    """Bernstein 3.23.0 answers 409 for two different things: a version conflict ("Version
    conflict: task T is at version N, expected M": the task changed meanwhile; reading it
    again and retrying may work) and a transition it refuses ("Illegal task transition:
    'done' -> 'cancelled'", "Task 'T' cannot be cancelled from status 'done'", "task T has
    unresolved dependencies", NONCE_MISMATCH: doing it again will not help)."""
    lowered = detail.lower()
    if "version" in lowered:
        return "version conflict: the task changed meanwhile (409)"
    if "nonce" in lowered:
        return "the approval changed meanwhile: its nonce no longer matches (409)"
    return "the server refuses this in the task's current state (409)"


def transport_meaning(exc: httpx.HTTPError, seconds: float, expired: bool = False) -> str:
    """A transport failure in an operator's words; `expired`: the request's deadline
    (`seconds`) cut it."""
    text = str(exc)
    lowered = text.lower()
    if expired:
        return f"no complete answer within {seconds:g} s"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {min(seconds, CONNECT_S):g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {seconds:g} s"
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
