"""A scripted port for the protocol tests: correct replies, except at one step where it misbehaves.

argv: MODE STEP PIDFILE [reset]. Its state is the model's initial one for the hello's configuration (with
`reset`, it announces the capability and answers a reset with that state). Every
start appends its pid (and, in `orphan` mode, the pid of a grandchild it leaves running) to
PIDFILE, so the tests can check that nothing survives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode, at, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pids = [os.getpid()]
    if mode == "orphan":  # a grandchild the port never waits for: the harness must kill it too
        pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid)
    with open(pidfile, "a") as f:
        f.write("".join(f"{pid}\n" for pid in pids))
    hello = json.loads(sys.stdin.readline())
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from properties import registry

    config = {k: tuple(v) if isinstance(v, list) else v for k, v in hello["config"].items()}
    model = registry.get(hello["mechanism"]).make_model(config, hello["variant"])
    initial = json.loads(json.dumps(model.vars(model.initial())))
    resets = sys.argv[4:] == ["reset"]
    send({"type": "ready", "vars": initial, **({"capabilities": ["reset"]} if resets else {})})
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "reset":
            send({"type": "ready", "vars": initial})
            continue
        seq = message["seq"]
        if seq == at:
            if mode == "crash":
                sys.stderr.write("boom: simulated crash\n")
                sys.exit(3)
            if mode in ("hang", "orphan"):
                time.sleep(60)
            if mode == "garbage":
                sys.stdout.write("this is not json\n")
                sys.stdout.flush()
                continue
            if mode == "wrong-step":
                send({"type": "reply", "seq": seq + 1, "observation": None, "vars": initial})
                continue
            if mode == "flood":
                while True:
                    sys.stdout.write("x" * 65536)
                    sys.stdout.flush()
            if mode == "violation":
                send({"type": "reply", "seq": seq, "observation": None, "vars": initial, "violations": ["TL-I2"]})
                continue
            if mode == "wrong-type":  # a message of no type this protocol knows, and no seq
                send({"type": "status", "state": "fine"})
                continue
            if mode == "extra":  # one step answered twice
                send({"type": "reply", "seq": seq, "observation": None, "vars": initial})
            if mode == "ready-reply":  # a ready where a reply belongs
                send({"type": "ready", "seq": seq, "vars": initial})
                continue
            if mode == "error":
                send({"type": "error", "seq": seq, "message": "not implemented"})
                continue
        send({"type": "reply", "seq": seq, "observation": None, "vars": initial})


if __name__ == "__main__":
    main()
