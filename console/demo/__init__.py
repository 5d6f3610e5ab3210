"""The embedded demo: a small real project, tickets that show every pane, and a
scripted demo agent (no API keys, no network)."""
