"""bernstein-tui: a live operator console for AI coding-agent orchestration."""

__version__ = "0.1.0"
