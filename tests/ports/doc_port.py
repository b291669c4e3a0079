"""A pidquota port written only from docs/ports.md and `brokerspec protocol --json`, as a port in another
language would be: it imports nothing from brokerspec, so it proves the documentation is enough.

It speaks the JSON-lines protocol on stdin/stdout and supports the exact hasher only (a murmur
configuration is refused in the hello). Run: python doc_port.py
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL = 2
"""The protocol version of docs/ports.md this port implements."""


class Cache:
    """The producer-id cache of one hello: entries per principal, the clock and the cleanup schedule."""

    def __init__(self, config: dict[str, Any], variant: str) -> None:
        if config["hasher"] != "exact":
            raise ValueError(f"hasher {config['hasher']!r} is not supported")
        self.window = int(config["window_ms"])
        self.dt = self.window // int(config["layer_count"])
        self.n_layer = int(config["n_layer"])
        self.principals: list[str] = list(config["principals"])
        self.readd = variant == "current"
        self.now = 0
        self.next_cleanup = self.window
        self.entries: dict[str, dict[str, Any]] = {}
        """principal -> {"count", "due", "layers": [[created, set of bits], ...]}"""

    def produce(self, principal: str, pids: list[int]) -> dict[str, Any]:
        entry = self.entries.setdefault(principal, {"count": 0, "due": self.now + self.dt,
                                                   "layers": [[self.now, set()]]})
        layers: list[list[Any]] = entry["layers"]
        new = []
        for pid in pids:
            holding = [layer for layer in layers if pid in layer[1]]
            if not holding or (self.readd and self.now - holding[-1][0] > self.dt):
                entry["count"] += 1
                rotate = False
                if entry["count"] == self.n_layer:
                    entry["count"], rotate = 0, True
                elif entry["due"] <= self.now:
                    entry["due"], rotate = self.now + self.dt, True
                if rotate:
                    if layers and not layers[-1][1]:
                        layers.pop()
                    while layers and self.now - layers[0][0] > self.window:
                        layers.pop(0)
                    layers.append([self.now, set()])
                layers[-1][1].add(pid)
            if not holding:
                new.append(pid)
        return {"new": new}

    def clean_map(self, removed: list[str]) -> None:
        for principal in list(self.entries):
            layers = self.entries[principal]["layers"]
            if not layers[-1][1]:
                layers.pop()
            while layers and self.now - layers[0][0] > self.window:
                layers.pop(0)
            if not layers:
                layers.append([self.now, set()])
            if not any(bits for _, bits in layers):
                del self.entries[principal]
                removed.append(principal)

    def advance(self, dt: int) -> dict[str, Any]:
        target = self.now + dt
        removed: list[str] = []
        while self.next_cleanup <= target:
            self.now = self.next_cleanup
            self.clean_map(removed)
            self.next_cleanup += self.dt
        self.now = target
        return {"removed": sorted(removed)}

    def cleanup(self) -> dict[str, Any]:
        removed: list[str] = []
        self.clean_map(removed)
        return {"removed": sorted(removed)}

    def vars(self) -> dict[str, Any]:
        entries = {p: {"count": e["count"], "next_rotation": max(e["due"], self.now),
                       "layers": [[c, c + self.window, sorted(bits)] for c, bits in e["layers"]]}
                   for p, e in self.entries.items()}
        return {"now": self.now, "next_cleanup": self.next_cleanup, "entries": entries}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    cache: Cache | None = None
    hello: dict[str, Any] = {}
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "hello":
            if message["protocol"] != PROTOCOL:  # never guess at a version this port does not know
                send({"type": "error", "message": f"this port speaks protocol {PROTOCOL} only"})
                return
            try:
                cache = Cache(message["config"], message["variant"])
            except ValueError as exc:
                send({"type": "error", "message": str(exc)})
                return
            hello = message
            send({"type": "ready", "vars": cache.vars(), "capabilities": ["reset", "pipeline"]})
            continue
        if message["type"] == "reset":
            cache = Cache(hello["config"], hello["variant"])
            send({"type": "ready", "vars": cache.vars()})
            continue
        assert cache is not None
        action, params = message["action"], message["params"]
        if action == "produce":
            observation = cache.produce(params["principal"], params["pids"])
        elif action == "advance":
            observation = cache.advance(params["dt"])
        else:
            observation = cache.cleanup()
        send({"type": "reply", "seq": message["seq"], "observation": observation, "vars": cache.vars()})


if __name__ == "__main__":
    main()
