"""Notification channels (seed 003's notifyChannels, warningChannels,
violationChannels): `console` is the engine notice every console already shows; an
http(s) URL gets the event's record as a JSON POST (httpx, best effort, bounded in
time); any other name is said once as unknown. Records are queued while the caller may
hold the task store's lock and sent by `flush`, never under it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from console.engine.events import EventLog

WEBHOOK_DEADLINE_S = 5.0

Post = Callable[[str, dict[str, Any]], None]


def webhook(url: str, record: dict[str, Any]) -> None:
    # the URL is bernstein.yaml's (data): a redirect is an answer, never followed
    response = httpx.post(url, json=record, timeout=WEBHOOK_DEADLINE_S, follow_redirects=False)
    response.raise_for_status()


class Notifier:
    def __init__(self, events: EventLog, post: Post | None = None) -> None:
        self.events = events
        self.post = post or webhook
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._unknown: set[str] = set()

    def notify(self, channels: Sequence[str], record: dict[str, Any]) -> None:
        """Queue `record` for each channel's webhook (sent by `flush`)."""
        for channel in channels:
            if channel.startswith(("http://", "https://")):
                self._outbox.append((channel, record))
            elif channel != "console" and channel not in self._unknown:
                self._unknown.add(channel)
                self.events.warning(f"notify channel '{channel}' is not console or a URL")

    def flush(self) -> None:
        """Send what is queued; a failure is an engine warning naming the URL."""
        outbox, self._outbox = self._outbox, []
        for url, record in outbox:
            self._deliver(url, record)

    def _deliver(self, url: str, record: dict[str, Any]) -> None:
        errors: list[str] = []

        def send() -> None:
            try:
                self.post(url, record)
            except Exception as exc:  # logged, never fatal
                errors.append(f"{type(exc).__name__}: {exc}")

        sender = threading.Thread(target=send, daemon=True, name="webhook")
        sender.start()
        sender.join(WEBHOOK_DEADLINE_S)
        if sender.is_alive():
            errors.append(f"no answer within {WEBHOOK_DEADLINE_S:.0f} s")
        if errors:
            self.events.warning(f"webhook {url} failed: {errors[0]}")
