"""`bernstein-tui init`: a `.sdd/` skeleton and a commented `bernstein.yaml`; never overwrites."""

from __future__ import annotations

import os
from pathlib import Path

from console.sdd.fileio import atomic_write_text
from console.sdd.paths import SKELETON_DIRS, SddPaths

SDD_CONFIG = """\
# Bernstein's per-project settings (read by Bernstein and by bernstein-tui).
server_port: 8052
max_workers: 4
default_model: sonnet
default_effort: high
"""

RUNTIME_GITIGNORE = "*.pid\n*.log\ntasks.jsonl\nsession.json\n"

BERNSTEIN_YAML = """\
# bernstein.yaml: the run configuration, read by Bernstein and by bernstein-tui.
# Unknown keys are reported, not fatal. Uncomment what you need.

# goal: "Describe what the agents should build"
# cli: auto              # claude | codex | gemini | script | auto
# budget: "$10"

# agents:
#   script:
#     command: ["python", "agent.py"]   # task JSON on stdin; exit 0 claims success
#   # what the vendor CLIs need, passed through the scrubbed environment (set the
#   # values in the engine's own environment, never in this file):
#   env:
#     - ANTHROPIC_API_KEY        # claude (or CLAUDE_CONFIG_DIR for a logged-in config)
#     # - ANTHROPIC_BASE_URL     # claude, through a proxy or gateway
#     # - OPENAI_API_KEY         # codex
#     # - CODEX_HOME             # codex, its config.toml (another endpoint: a
#     #                          #   [model_providers.X] with base_url) and login
#     # - GEMINI_API_KEY         # gemini
#     # - GOOGLE_GEMINI_BASE_URL # gemini, another endpoint (with it, set
#     #                          #   security.auth.selectedType: gemini-api-key in
#     #                          #   ~/.gemini/settings.json)

# quality_gates:
#   enabled: true
#   lint: true
#   lint_command: ruff check .
#   type_check: false
#   tests: false
#   test_command: pytest -x -q
#   timeout_s: 120
#   base_ref: main

# cascade:
#   ladder: [haiku, sonnet, opus]    # for script/generic agents
#   ladders:                         # each vendor CLI's own (these are the defaults)
#     claude: [haiku, sonnet, opus]
#     codex: [gpt-6-luna, gpt-6.1-sol, gpt-6-astra]
#     gemini: [flash-lite, flash, pro]

# sla:
#   warning_threshold: 0.8
#   check_interval: 30
#   violation_action: notify   # notify | fail
"""


def init_project(root: Path) -> list[str]:
    """Create what is missing; return the paths created (relative to root)."""
    paths = SddPaths(root)
    created: list[str] = []
    for rel in SKELETON_DIRS:
        directory = paths.sdd / rel
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            created.append(paths.display(directory) + os.sep)
    files = {
        paths.config_yaml: SDD_CONFIG,
        paths.sdd / "runtime" / ".gitignore": RUNTIME_GITIGNORE,
        paths.project_config: BERNSTEIN_YAML,
    }
    for path, text in files.items():
        if not path.exists():
            atomic_write_text(path, text)
            created.append(paths.display(path))
    return created
