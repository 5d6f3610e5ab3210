"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: its answers are written by
the test (a function of the request), its requests are kept for assertions."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.http_kit import loopback, send_json

Answer = Callable[[dict[str, Any], int], tuple[int, str]]  # (request body, n) → (status, text)


@contextmanager
def llm_server(answer: Answer) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen.append(body)
                number = len(seen)
            status, text = answer(body, number)
            send_json(self, {
                "model": body.get("model"), "choices": [{"message": {"content": text}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 50}}, status)

        def log_message(self, *args: object) -> None:
            pass

    with loopback(Handler) as url:
        yield f"{url}/v1", seen


def system_of(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])
