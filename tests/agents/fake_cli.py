"""A stand-in for the claude, codex and gemini CLIs (named by the link it is run as),
for the engine's wiring tests: it takes the flags the real CLI takes, refuses what the
real one refuses (claude's --dangerously-skip-permissions as root, codex writing with
no writable sandbox, gemini in an untrusted folder: exit 55), does what the prompt's
`write PATH TEXT` lines say, and prints its run in the real CLI's JSON mode, with
stderr noise in between. The real CLIs are run by tests/test_real_clis.py.

Prompt words: `unsure-on MODEL` (its final message says it is not sure on that model),
`nologin` (it says it is not logged in).
"""

import json
import os
import sys
from pathlib import Path

name = Path(sys.argv[0]).name
args = sys.argv[1:]
VERSIONS = {"claude": "2.1.197 (Claude Code)", "codex": "codex-cli 0.169.0",
            "gemini": "0.61.0"}
if args == ["--version"]:
    print(VERSIONS[name])
    sys.exit(0)


def value(flag: str) -> str:
    return args[args.index(flag) + 1] if flag in args else ""


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)
    print("(node:7) Warning: I'm not sure this is supported", file=sys.stderr, flush=True)


if name == "claude":
    if "--dangerously-skip-permissions" in args and os.geteuid() == 0:
        print("--dangerously-skip-permissions cannot be used with root/sudo privileges",
              file=sys.stderr)
        sys.exit(1)
    prompt, model = args[args.index("-p") + 1], value("--model")
    writable = value("--permission-mode") in ("acceptEdits", "bypassPermissions")
elif name == "codex":
    prompt, model = args[-1], value("-m")
    writable = value("--sandbox") == "workspace-write"  # else read-only: writes nothing
else:
    prompt, model = value("-p"), value("-m")
    if "--skip-trust" not in args and os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") != "true":
        print("This folder is not trusted.", file=sys.stderr)
        sys.exit(55)
    writable = "--yolo" in args

if "nologin" in prompt.split():
    if name == "claude":
        emit({"type": "result", "subtype": "success", "is_error": True,
              "result": "Not logged in · Please run /login", "usage": {}})
    elif name == "codex":
        emit({"type": "error", "message": "Missing environment variable: `OPENAI_API_KEY`"})
    else:
        print("Please set an Auth method in your settings.json or specify GEMINI_API_KEY",
              file=sys.stderr)
    sys.exit(1)

written = []
for line in prompt.splitlines():
    words = line.split()
    if len(words) >= 2 and words[0] == "write" and writable:
        Path(words[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(words[1]).write_text(" ".join(words[2:]) + "\n")
        written.append(words[1])
words = prompt.split()
unsure = "unsure-on" in words and words[words.index("unsure-on") + 1] == model
final = ("I'm not sure this is right; it is a partial implementation." if unsure
         else f"Done on {model}: wrote {', '.join(written) or 'nothing'}.")

if name == "claude":
    emit({"type": "system", "subtype": "init", "model": model})
    for path in written:
        emit({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": path, "name": "Write", "input": {"file_path": path}}]}})
        emit({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": path, "content": "ok"}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "result": final,
          "total_cost_usd": 0.0123, "usage": {"input_tokens": 1200,
                                              "cache_read_input_tokens": 800,
                                              "output_tokens": 80}})
elif name == "codex":
    emit({"type": "thread.started", "thread_id": "t"})
    for path in written:
        emit({"type": "item.completed", "item": {"type": "file_change",
                                                 "changes": [{"path": path}]}})
    emit({"type": "item.completed", "item": {"type": "agent_message", "text": final}})
    emit({"type": "turn.completed", "usage": {"input_tokens": 4000, "output_tokens": 1000}})
else:
    emit({"type": "init", "model": model})
    for path in written:
        emit({"type": "tool_use", "tool_name": "write_file", "parameters": {"file_path": path}})
        emit({"type": "tool_result", "status": "success", "output": "ok"})
    emit({"type": "message", "role": "assistant", "content": final, "delta": True})
    emit({"type": "result", "status": "success",
          "stats": {"input_tokens": 3000, "output_tokens": 500}})
