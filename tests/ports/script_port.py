"""A scripted port for the protocol tests: correct replies, except at one step where it misbehaves.

argv: MODE STEP PIDFILE [reset] [pipeline] [model]. Its state is the model's initial one for the hello's
configuration (with `reset`, it announces the capability and answers a reset with that state; with `pipeline`
it announces that capability too, which it has: it answers each line as it reads it); with `model` it steps the
model and answers with its state and observation, a correct port but for MODE. Every start appends its pid
(and, in `orphan` mode, the pid of a grandchild it leaves running) to PIDFILE, so the tests can check that
nothing survives. Mode `skip` answers nothing to step STEP (and the next steps as usual); `reset-hang` hangs
at every reset; `slow-start` takes STEP ms to start, as a JVM on a loaded machine; `refuse` appends each hello's
config to PIDFILE.hellos (a JSON line) and refuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


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
    if mode == "slow-start":
        time.sleep(at / 1000)
    line = sys.stdin.readline()
    hello = json.loads(line)
    if mode == "refuse":
        with open(f"{pidfile}.hellos", "a") as f:
            f.write(json.dumps(hello["config"], sort_keys=True) + "\n")
        send({"type": "error", "message": "refused (a test port)"})
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from models.core import Action
    from properties import registry
    from properties.engines.lockstep import as_json

    config = {k: _tuples(v) for k, v in hello["config"].items()}
    model = registry.get(hello["mechanism"]).make_model(config, hello["variant"])
    initial = json.loads(json.dumps(model.vars(model.initial())))
    flags = set(sys.argv[4:])
    capabilities = [c for c in ("reset", "pipeline") if c in flags]
    send({"type": "ready", "vars": initial, **({"capabilities": capabilities} if capabilities else {})})
    state = model.initial()
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "reset":
            if mode == "reset-hang":
                time.sleep(60)
            state = model.initial()
            send({"type": "ready", "vars": initial})
            continue
        seq = message["seq"]
        observation: object = None
        if "model" in flags:
            params = sorted((str(k), _tuples(v)) for k, v in message["params"].items())
            state, observed = model.step(state, Action(message["action"], tuple(params)))
            observation = as_json(observed)
        if seq == at and mode == "skip":
            continue
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
        now = as_json(model.vars(state)) if "model" in flags else initial
        send({"type": "reply", "seq": seq, "observation": observation, "vars": now})


def _tuples(value: Any) -> Any:
    """JSON arrays as the models' tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


if __name__ == "__main__":
    main()
