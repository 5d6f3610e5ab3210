"""One httpx client for an OpenAI-compatible chat-completions endpoint.

With no endpoint configured, `LlmClient.configured` is False and every caller
says so plainly and takes its deterministic path. The API key is read from the
environment variable named in config and never logged or written anywhere.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from console.sdd.project_config import LlmConfig

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class LlmUnavailable(Exception):
    """Not configured, or the endpoint failed; the message is shown as it is."""


@dataclass(frozen=True, slots=True)
class LlmReply:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int


DEFAULT_PRICES = {"haiku": (1.0, 5.0), "sonnet": (3.0, 15.0), "opus": (5.0, 25.0),
                  "gpt-4o-mini": (0.15, 0.6), "gpt-4o": (2.5, 10.0), "gemini-flash": (0.3, 2.5)}


class LlmClient:
    """Chat completions with retries, token and cost accounting and a per-run budget.

    `on_call` receives one dict per answered call (model, tokens, cost, purpose) — the
    engine appends it to metrics/llm_calls.jsonl; the key never appears in it.
    """

    def __init__(self, config: LlmConfig, *, transport: httpx.BaseTransport | None = None,
                 on_call: Callable[[dict], None] | None = None) -> None:
        self.config = config
        self._client: httpx.Client | None = None
        self._transport = transport
        self.on_call = on_call
        self._lock = threading.Lock()
        self.spent_usd = 0.0
        self.tokens = [0, 0]
        self.calls = 0

    def _price(self, model: str) -> tuple[float, float]:
        prices = {**DEFAULT_PRICES, **self.config.prices}
        best = max((name for name in prices if name in model.lower()), key=len, default=None)
        return prices[best] if best else (0.0, 0.0)

    def _account(self, reply: LlmReply, purpose: str) -> None:
        price_in, price_out = self._price(reply.model)
        cost = (reply.prompt_tokens * price_in + reply.completion_tokens * price_out) / 1e6
        with self._lock:
            self.spent_usd += cost
            self.tokens[0] += reply.prompt_tokens
            self.tokens[1] += reply.completion_tokens
            self.calls += 1
        if self.on_call is not None:
            self.on_call({"timestamp": time.time(), "purpose": purpose, "model": reply.model,
                          "prompt_tokens": reply.prompt_tokens,
                          "completion_tokens": reply.completion_tokens,
                          "cost_usd": round(cost, 6)})

    @property
    def configured(self) -> bool:
        return self.config.configured

    def not_configured_reason(self) -> str:
        return "no LLM endpoint configured (set llm.base_url in bernstein.yaml)"

    def _http(self) -> httpx.Client:
        if self._client is None:
            headers = {"Content-Type": "application/json"}
            key = os.environ.get(self.config.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.Client(base_url=str(self.config.base_url).rstrip("/"),
                                        headers=headers, timeout=self.config.timeout_s,
                                        transport=self._transport,
                                        follow_redirects=False)  # the key stays with its URL
        return self._client

    def chat(self, system: str, user: str, *, max_tokens: int = 512,
             model: str | None = None, purpose: str = "") -> LlmReply:
        if not self.configured:
            raise LlmUnavailable(self.not_configured_reason())
        budget = self.config.budget_usd
        if budget is not None and self.spent_usd >= budget:
            raise LlmUnavailable(f"the LLM budget of ${budget:.2f} for this run is spent "
                                 f"(${self.spent_usd:.4f}); LLM calls stopped")
        body = {"model": model or self.config.model, "max_tokens": max_tokens,
                "temperature": 0,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": user}]}
        delay = 0.5
        for attempt in range(self.config.max_retries + 1):
            try:
                response = self._http().post("/chat/completions", json=body)
            except httpx.HTTPError as exc:
                if attempt == self.config.max_retries:
                    raise LlmUnavailable(f"LLM endpoint unreachable: {type(exc).__name__}: "
                                         f"{exc}") from None
            else:
                if response.status_code in RETRY_STATUSES and attempt < self.config.max_retries:
                    pass
                elif response.status_code >= 400:
                    raise LlmUnavailable(f"LLM endpoint answered {response.status_code}: "
                                         f"{response.text[:200]}")
                else:
                    reply = self._reply(response, str(body["model"]))
                    self._account(reply, purpose)
                    return reply
            time.sleep(delay)
            delay *= 2
        raise LlmUnavailable("LLM endpoint kept failing")  # pragma: no cover - loop returns

    @staticmethod
    def _reply(response: httpx.Response, model: str) -> LlmReply:
        try:
            data = response.json()
            text = data["choices"][0]["message"]["content"] or ""
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable(f"LLM endpoint answered an unexpected body: "
                                 f"{response.text[:200]}") from None
        def tokens(key: str) -> int:
            try:
                return int(usage.get(key) or 0)
            except (TypeError, ValueError, AttributeError):
                return 0  # an odd usage block costs nothing, and breaks nothing

        return LlmReply(str(text), str(data.get("model") or model),
                        tokens("prompt_tokens"), tokens("completion_tokens"))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
