"""A fake model API on 127.0.0.1 that the real claude, codex and gemini CLIs talk to:
Anthropic Messages (`POST /v1/messages`, SSE, tool use), OpenAI Responses
(`POST /v1/responses`, SSE, function and custom tool calls) and Gemini
(`…:streamGenerateContent?alt=sse` and `…:generateContent`).

It plays a coding agent with one skill: a prompt that says `Create PATH containing the
line: TEXT` gets one tool call that writes it (claude's Write, codex's apply_patch or
shell, gemini's write_file), and once the tool's result is in the conversation a final
message `Done: wrote PATH.` Side requests (titles, next-speaker checks, anything without
tools) get a short plain answer. Every answer reports fixed token counts, and the
server keeps what it reported so a test can compare the CLI's own figures with them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.http_kit import loopback, send_json

TASK = re.compile(r"Create (\S+) containing the line: ([^\n\"\\<]+)")
# where each CLI says the agent works (an absolute path for the write tools that want one)
CWD = re.compile(r"(?:Primary working directory|Working directory|<cwd>|"
                 r"working in the directory: ?|workspace directories?:? ?)\s*(/[^\s<\"\\]+)",
                 re.IGNORECASE)
USAGE_IN, USAGE_OUT = 1200, 40  # per answer


@dataclass
class Served:
    """What the fake answered: per protocol, requests and the tokens it reported."""
    requests: list[tuple[str, str]] = field(default_factory=list)  # (protocol, path)
    models: dict[str, set[str]] = field(default_factory=dict)  # protocol → models asked
    efforts: dict[str, set[str]] = field(default_factory=dict)  # protocol → efforts asked
    tokens: dict[str, list[int]] = field(default_factory=dict)  # protocol → [in, out]
    tool_calls: dict[str, list[str]] = field(default_factory=dict)  # protocol → tool names
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, protocol: str, path: str, body: dict[str, Any]) -> None:
        model = body.get("model") or path.split("/models/")[-1].split(":")[0]
        effort = (body.get("reasoning") or {}).get("effort") or \
            (body.get("output_config") or {}).get("effort")
        with self.lock:
            self.requests.append((protocol, path))
            self.models.setdefault(protocol, set()).add(str(model))
            if effort:
                self.efforts.setdefault(protocol, set()).add(str(effort))
            total = self.tokens.setdefault(protocol, [0, 0])
            total[0] += USAGE_IN
            total[1] += USAGE_OUT

    def called(self, protocol: str, tool: str) -> None:
        with self.lock:
            self.tool_calls.setdefault(protocol, []).append(tool)


def _task(text: str) -> tuple[str, str] | None:
    found = TASK.search(text)
    return (found.group(1), found.group(2).strip()) if found else None


def _absolute(text: str, path: str) -> str:
    found = CWD.search(text)
    return f"{found.group(1).rstrip('/.')}/{path}" if found else path


# -- Anthropic Messages -------------------------------------------------------------------


def _anthropic(body: dict[str, Any], text: str, served: Served) -> list[tuple[str, dict]]:
    tools = {t.get("name") for t in body.get("tools") or []}
    messages = body.get("messages") or []
    answered = any(isinstance(block, dict) and block.get("type") == "tool_result"
                   for m in messages if isinstance(m.get("content"), list)
                   for block in m["content"])
    task = _task(text)
    usage = {"input_tokens": USAGE_IN, "output_tokens": 1}
    start = {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model"),
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
    if task and "Write" in tools and not answered:
        served.called("anthropic", "Write")
        path, line = task
        arguments = json.dumps({"file_path": _absolute(text, path), "content": line + "\n"})
        block = {"type": "tool_use", "id": "toolu_fake1", "name": "Write", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": arguments}
        stop = "tool_use"
    else:
        said = f"Done: wrote {task[0]}." if task and answered else "Fake title"
        if "format" in (body.get("output_config") or {}):  # a side call wanting JSON
            said = json.dumps({"title": said})
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": said}
        stop = "end_turn"
    return [("message_start", start),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": USAGE_OUT}}),
            ("message_stop", {"type": "message_stop"})]


# -- OpenAI Responses ---------------------------------------------------------------------


def _tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name → tool: the request's `tools`, and those an `additional_tools` input item
    offers (codex's code mode nests them in namespaces)."""
    found: dict[str, dict[str, Any]] = {}
    pending = list(body.get("tools") or [])
    pending += [t for i in body.get("input") or [] if isinstance(i, dict)
                and i.get("type") == "additional_tools" for t in i.get("tools") or []]
    while pending:
        tool = pending.pop()
        pending += tool.get("tools") or []
        found.setdefault(str(tool.get("name") or tool.get("type")), tool)
    return found


def _responses(body: dict[str, Any], text: str, served: Served) -> list[tuple[str, dict]]:
    items = body.get("input") or []
    answered = any(isinstance(i, dict) and str(i.get("type", "")).endswith("_output")
                   for i in items)
    task, tools = _task(text), _tools(body)
    item: dict[str, Any]
    if task and not answered and ("exec" in tools or "apply_patch" in tools):
        path, line = task
        patch = f"*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch\n"
        name, call = ("exec", f"await tools.apply_patch({json.dumps(patch)});\n"
                      f"text('patched');\n") if "exec" in tools else ("apply_patch", patch)
        served.called("responses", name)
        item = ({"type": "custom_tool_call", "id": "ctc_fake1", "call_id": "call_fake1",
                 "name": name, "input": call, "status": "completed"}
                if tools[name].get("type") == "custom" else
                {"type": "function_call", "id": "fc_fake1", "call_id": "call_fake1",
                 "name": name, "arguments": json.dumps({"input": call})})
    else:
        said = f"Done: wrote {task[0]}." if task and answered else "Fake title"
        item = {"type": "message", "role": "assistant", "id": "msg_fake1", "status": "completed",
                "content": [{"type": "output_text", "text": said, "annotations": []}]}
    usage = {"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": USAGE_IN + USAGE_OUT}
    response = {"id": "resp_fake", "object": "response", "model": body.get("model"),
                "status": "completed", "output": [item], "usage": usage}
    return [("response.created", {"type": "response.created",
                                  "response": {**response, "status": "in_progress",
                                               "output": []}}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": response})]


# -- Gemini -------------------------------------------------------------------------------


def _gemini(body: dict[str, Any], text: str, served: Served) -> dict[str, Any]:
    declared = {d.get("name") for t in body.get("tools") or []
                for d in t.get("functionDeclarations") or []}
    answered = any("functionResponse" in part for c in body.get("contents") or []
                   for part in c.get("parts") or [])
    task = _task(text)
    part: dict[str, Any]
    if task and not answered and "write_file" in declared:
        served.called("gemini", "write_file")
        path, line = task
        part = {"functionCall": {"name": "write_file", "args": {
            "file_path": _absolute(text, path), "content": line + "\n"}}}
    elif "json" in str((body.get("generationConfig") or {}).get("responseMimeType", "")):
        part = {"text": json.dumps({"reasoning": "The task is done.", "next_speaker": "user",
                                    "model_choice": "flash", "complexity_score": 10})}
    else:
        part = {"text": f"Done: wrote {task[0]}." if task and answered else "Fake title"}
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
                              "totalTokenCount": USAGE_IN + USAGE_OUT},
            "modelVersion": "fake"}


@contextmanager
def model_api() -> Iterator[tuple[str, Served]]:
    """The fake on an ephemeral port: (base URL without a path, what it served)."""
    served = Served()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            text = raw.decode("utf-8", "replace")
            path = self.path.split("?")[0]
            if path.endswith("/messages"):
                served.count("anthropic", path, body)
                self._sse(_anthropic(body, text, served), named=True)
            elif path.endswith("/responses"):
                served.count("responses", path, body)
                self._sse(_responses(body, text, served), named=True)
            elif ":streamGenerateContent" in path:
                served.count("gemini", path, body)
                self._sse([("", _gemini(body, text, served))], named=False)
            elif ":generateContent" in path:
                served.count("gemini", path, body)
                send_json(self, _gemini(body, text, served))
            elif ":countTokens" in path:
                send_json(self, {"totalTokens": USAGE_IN})
            else:
                send_json(self, {"error": {"message": f"fake model API: no {path}"}}, 404)

        def do_GET(self) -> None:  # model lists and the like: nothing to offer
            send_json(self, {"data": [], "models": []} if "models" in self.path else {}, 200)

        def _sse(self, events: list[tuple[str, dict]], named: bool) -> None:
            data = b"".join(
                ((f"event: {name}\n" if named else "") + f"data: {json.dumps(payload)}\n\n")
                .encode() for name, payload in events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with loopback(Handler) as url:
        yield url, served
