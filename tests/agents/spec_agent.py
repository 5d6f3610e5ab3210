"""A script agent for the tests: does what its task's description says, line by line.

  write PATH TEXT     write TEXT (may be empty) to PATH in the worktree
  sleep SECONDS       sleep (a float; "rand A B" picks one between A and B)
  exit CODE           exit with CODE
  hang                sleep forever
  prompt PATH         write the prompt it was given to PATH
  say TEXT            print TEXT
  usage IN OUT        report token usage (BERNSTEIN_USAGE line)
  only MODEL VERB …   run VERB … only when the model is MODEL
  unless MODEL VERB … run VERB … unless the model is MODEL
  told WORD VERB …    run VERB … only when the prompt, beyond this description, has
                      WORD (a reviewer's, a reflection's)
  untold WORD VERB …  run VERB … unless it has
{model} and {attempt} in arguments are replaced.

It logs start/end lines (JSON) to $SPEC_AGENT_LOG and holds an exclusive flock on
$SPEC_AGENT_LOCKS/<task>.lock while it runs; finding it held means two attempts of
one task ran at once, which it logs as "concurrent".
"""

import fcntl
import json
import os
import random
import sys
import time

task = json.load(sys.stdin)
log_path = os.environ.get("SPEC_AGENT_LOG")
locks = os.environ.get("SPEC_AGENT_LOCKS")


def log(event: str) -> None:
    if log_path:
        with open(log_path, "a") as handle:
            handle.write(json.dumps({"task": task["id"], "attempt": task["attempt"],
                                     "event": event, "t": time.time(), "pid": os.getpid(),
                                     "model": task["model"]}) + "\n")


if locks:
    os.makedirs(locks, exist_ok=True)
    lock = open(os.path.join(locks, f"{task['id']}.lock"), "w")  # noqa: SIM115 - held for life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log("concurrent")
        fcntl.flock(lock, fcntl.LOCK_EX)
log("start")
print(f"spec agent: {task['id']} attempt {task['attempt']} on {task['model']}")
assert os.environ.get("BERNSTEIN_TASK_ID") == task["id"]
assert os.environ.get("BERNSTEIN_MODEL") == task["model"]
for line in task["description"].splitlines():
    words = line.replace("{model}", task["model"]).replace(
        "{attempt}", str(task["attempt"])).split()
    if not words:
        continue
    if words[0] in ("only", "unless") and len(words) > 2:
        matches = words[1] == task["model"]
        if matches != (words[0] == "only"):
            continue
        words = words[2:]
    if words[0] in ("told", "untold") and len(words) > 2:
        told = words[1] in task["prompt"].replace(task["description"], "")
        if told != (words[0] == "told"):
            continue
        words = words[2:]
    verb, args = words[0], words[1:]
    if verb == "write":
        path = args[0]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as handle:
            handle.write(" ".join(args[1:]) + "\n")
    elif verb == "sleep":
        seconds = (random.uniform(float(args[1]), float(args[2])) if args[0] == "rand"
                   else float(args[0]))
        time.sleep(seconds)
    elif verb == "exit":
        print(f"spec agent: exiting with {args[0]} as told")
        log("end")
        sys.exit(int(args[0]))
    elif verb == "hang":
        while True:
            time.sleep(1)
    elif verb == "say":
        print(" ".join(args))
    elif verb == "usage":
        print("BERNSTEIN_USAGE " + json.dumps({"input_tokens": int(args[0]),
                                               "output_tokens": int(args[1])}))
    elif verb == "prompt":
        os.makedirs(os.path.dirname(args[0]) or ".", exist_ok=True)
        with open(args[0], "w") as handle:
            handle.write(task["prompt"])
log("end")
