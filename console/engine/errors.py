"""The engine's error types: each message is the one line an operator sees."""

from __future__ import annotations


class EngineError(Exception):
    """Something the engine cannot do; the message says what and why."""


class IllegalTransition(EngineError):
    """A state change the transition table does not allow."""


class OwnedElsewhere(EngineError):
    """Another live process owns this project's .sdd/."""


class AdapterError(EngineError):
    """An agent adapter cannot run (not installed, not configured)."""


class Untrusted(EngineError):
    """The project is not trusted (or its configuration changed): none of its code runs."""
