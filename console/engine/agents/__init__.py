"""Agent adapters and the process runner."""
