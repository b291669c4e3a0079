"""A port that answers with the reference implementation, for any mechanism: a correct port to verify.

argv: [MUTANT.patch]. With a planted bug from `tests/mutants/`, the port runs the reference of a patched
copy of the project instead (made once, in the temporary folder), and reports what the reference's adapter
judges on its own record as `violations`: a port with a known bug in it, which `verify` must name. Announces
`reset` (a fresh reference per walk).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _tuples(value: Any) -> Any:
    """The hello's JSON arrays as the tuples the configurations hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def main() -> None:
    tree = ROOT
    if sys.argv[1:]:
        sys.path.insert(0, str(ROOT))
        from properties.cli import mutants
        from properties.engines.cache import code_digest

        patch = Path(sys.argv[1])
        sources = code_digest(ROOT / package for package in mutants.PACKAGES)  # a copy of the tree as it is now
        digest = hashlib.sha256(patch.read_bytes() + sources.encode()).hexdigest()[:16]
        tree = Path(tempfile.gettempdir()) / f"brokerspec-reference-port-{digest}"
        if not tree.exists():  # patched once, shared by the port's later processes (a shrink starts many)
            scratch = Path(tempfile.mkdtemp(prefix="reference-port-"))
            mutants.patched_tree(mutants.load(patch), scratch)
            try:
                scratch.rename(tree)
            except OSError:  # another process of the port made it first
                shutil.rmtree(scratch)
        for name in [n for n in sys.modules if n.split(".")[0] in mutants.PACKAGES]:
            del sys.modules[name]
    sys.path.insert(0, str(tree))
    from properties import registry
    from properties.engines.lockstep import as_json

    hello = json.loads(sys.stdin.readline())
    config = {k: _tuples(v) for k, v in hello["config"].items()}
    mechanism = registry.get(hello["mechanism"]).for_config(config)
    assert mechanism.make_reference is not None
    model = mechanism.make_model(config, hello["variant"])

    def fresh() -> Any:
        assert mechanism.make_reference is not None
        return mechanism.make_reference(model.config, hello["variant"])

    from models.core import Action

    reference = fresh()
    send({"type": "ready", "vars": as_json(reference.vars()), "capabilities": ["reset"]})
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "reset":
            reference.close()
            reference = fresh()
            send({"type": "ready", "vars": as_json(reference.vars())})
            continue
        action = Action(message["action"], tuple(sorted((k, _tuples(v)) for k, v in message["params"].items())))
        observation = reference.apply(action)
        send({"type": "reply", "seq": message["seq"], "observation": as_json(observation),
              "vars": as_json(reference.vars()), "violations": reference.violations()})


if __name__ == "__main__":
    main()
