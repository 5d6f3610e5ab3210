"""A script agent that prints what claude prints in its stream-JSON mode — 200 tool calls
with their usage, 200 tool results (about 100 KB, 401 lines) — and exits: what the live
telemetry reads (#33), for engine_throughput's stream-JSON figure."""

import json
import sys

sys.stdin.read()
lines = []
for i in range(200):
    lines.append(json.dumps({"type": "assistant", "message": {
        "id": f"msg_{i // 2}", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Edit",
                                           "input": {"file_path": f"f{i}.py"}}],
        "usage": {"input_tokens": 100 + i, "cache_read_input_tokens": 1000,
                  "output_tokens": 20}}}))
    lines.append(json.dumps({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok " * 50}]}}))
lines.append(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                         "result": "done", "total_cost_usd": 0.01,
                         "usage": {"input_tokens": 5000, "output_tokens": 400}}))
sys.stdout.write("\n".join(lines) + "\n")
