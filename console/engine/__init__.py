"""The embedded engine: tickets → tasks → agents in git worktrees → janitor → merge.

It talks to the console only through `.sdd/` files (DESIGN §1) and takes operator
actions through `console.control.Control`.
"""
