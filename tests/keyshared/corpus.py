"""Find, shrink and record the counterexamples committed under `traces/corpus/keyshared/`.

Regenerate with `python -m tests.keyshared.corpus` (from the repository root). Three kinds:
- the historical variants' KS-I1 bugs as the explorer finds them (shortest paths, deterministic: the
  tests check that they regenerate byte for byte) and as the Hypothesis machine finds them (shrunk
  by `properties.engines.shrink`; they depend on the Hypothesis version, so the tests only replay them);
- the spec's §6 flows as named traces: classic's issue-1 and issue-2, and pip282's reconnect;
- classic's #21199 stuck subscription (KS-I5b), a liveness trace: replay judges its last state;
- the two spec gaps where pip379 breaks KS-I4 as the spec words it (models/keyshared/state.py, A and B),
  found by the explorer on configurations that put them back in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

from hypothesis import Phase, settings

from models.core import Action, Param
from properties.engines import counterexamples
from properties.engines.explorer import explore
from properties.engines.stateful import FailedRun
from properties.keyshared.binding import MECHANISM
from properties.keyshared.dispatcher import EXPLORE_CONFIGS, GATE, HYPOTHESIS_CONFIGS
from traces.format import Trace, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "keyshared"
TWINS = ("classic", "pip282")
TARGET = "KS-I1"
STUCK = "KS-I5b"  # classic's #21199: a rejoined consumer's own key is never delivered
# Generation only: `properties.engines.shrink` does the shrinking (Hypothesis' own shrinker takes minutes here).
SEARCH = settings(max_examples=200, stateful_step_count=40, derandomize=True, database=None, deadline=None,
                  phases=[Phase.generate])

# §6 flows: the spec's three consumers and keys, with the permits the spec gives them.
SPEC_FLOWS: dict[str, Param] = {
    **GATE,
    "names": ("consumer1", "consumer2", "consumer3"),
    "keys": ("4", "0", "5"),
    "max_messages": 6,
    "add_permits": (0, 1, 10, 1000),
    "max_permits": 1000,
    "actions": ("add", "remove", "publish", "flow", "ack", "read", "run"),
}
# Gap A: a disconnect while a Replay read is in flight (two consumers; keys "5" and "0").
GAP_A: dict[str, Param] = {
    "names": ("consumer1", "consumer2"),
    "keys": ("5", "0"),
    "max_consumers": 2,
    "same_name": False,
    "max_messages": 3,
    "add_permits": (0, 1),
    "max_permits": 2,
    "actions": ("add", "remove", "publish", "flow", "read", "begin_read"),
    "disconnect_during_replay_read": True,
}
# Gap B: a later message released by a negative ack overtakes an earlier one of its hash.
GAP_B: dict[str, Param] = {
    "names": ("consumer1", "consumer2"),
    "keys": ("5", "0"),
    "max_consumers": 2,
    "max_messages": 2,
    "add_permits": (0, 1, 2),
    "max_permits": 2,
    "interleave": 1,
    "actions": ("add", "remove", "publish", "flow", "redeliver", "read", "interleaved_read"),
    "disconnect_during_replay_read": False,
    "exempt_nacked_p": False,
}


def _add(cid: int, name: str, permits: int) -> Action:
    return Action("add", (("consumer", cid), ("name", name), ("permits", permits)))


def _publish(keys: str) -> list[Action]:
    return [Action.of("publish", key=k) for k in keys]


READ, RUN = Action.of("read"), Action.of("run")
FLOWS: dict[str, tuple[str, tuple[Action, ...]]] = {
    # §6a issue-1, up to the reads that give consumer3 1:1 and 1:2 while consumer1 holds 1:0 (the first
    # read after the join only clears is_dispatcher_stuck_on_replays, so the spec's "read" is a run).
    "classic-issue-1": ("classic", (
        _add(1, "consumer1", 1), _add(2, "consumer2", 1000), *_publish("444000"), READ,
        _add(3, "consumer3", 1000), RUN,
    )),
    # §6a issue-2: 1:1 goes to replay without any consumer change, then consumer3 joins and gets it.
    "classic-issue-2": ("classic", (
        _add(1, "consumer1", 1), _add(2, "consumer2", 1000), *_publish("4"), READ, *_publish("4"), READ,
        _add(3, "consumer3", 1000), RUN,
    )),
    # §6b reconnect + replay: the new consumer2 is recorded at last_sent 1:1 and gets it at once.
    "pip282-reconnect": ("pip282", (
        _add(1, "consumer1", 0), _add(2, "consumer2", 10), *_publish("00"), READ, Action.of("remove", consumer=2),
        Action.of("flow", consumer=1, n=1), READ, _add(2, "consumer2", 10), READ,
    )),
}


def shrunk(config: Mapping[str, Param], variant: str, actions: Sequence[Action], target: str) -> tuple[Action, ...]:
    return counterexamples.shrunk(MECHANISM, config, variant, actions, target)


def explorer_path(config: Mapping[str, Param], variant: str, target: str) -> tuple[Action, ...]:
    return counterexamples.explorer_path(MECHANISM, config, variant, target)


def explorer_trace(variant: str) -> Trace:
    """The twin's shortest KS-I1 counterexample on the `small` configuration, shrunk."""
    return counterexamples.explorer_trace(MECHANISM, EXPLORE_CONFIGS["small"], variant, TARGET)


def stuck_trace(variant: str) -> Trace:
    """The #21199 stuck subscription (KS-I5b) at the explorer's shallowest stuck state on `small`."""
    config = EXPLORE_CONFIGS["small"]
    found = explore(MECHANISM.make_model(config, variant))
    finding = next(f for f in found.findings if f.name == STUCK)
    return counterexamples.recorded(MECHANISM, config, variant, finding.path, "explorer", (finding.kind, finding.name))


def gap_trace(config: Mapping[str, Param]) -> Trace:
    """pip379's shortest KS-I4 counterexample with one of the spec gaps put back in."""
    return counterexamples.explorer_trace(MECHANISM, config, "pip379", "KS-I4")


def hypothesis_run(variant: str, search: settings = SEARCH) -> FailedRun:
    """The Hypothesis lockstep machine's failing run on the `hot` configuration."""
    return counterexamples.hypothesis_run(MECHANISM, HYPOTHESIS_CONFIGS["hot"], variant, search)


def hypothesis_trace(variant: str, search: settings = SEARCH) -> Trace:
    return counterexamples.hypothesis_trace(MECHANISM, HYPOTHESIS_CONFIGS["hot"], variant, TARGET, search)


def flow_trace(name: str) -> Trace:
    variant, actions = FLOWS[name]
    return counterexamples.recorded(MECHANISM, SPEC_FLOWS, variant, actions, "spec")


GAPS = {"pip379-gap-a-KS-I4.json": GAP_A, "pip379-gap-b-KS-I4.json": GAP_B}


def deterministic() -> dict[str, Callable[[], Trace]]:
    """The traces that regenerate byte for byte, by file name."""
    out: dict[str, Callable[[], Trace]] = {}
    for variant in TWINS:
        out[f"{variant}-explorer-{TARGET}.json"] = partial(explorer_trace, variant)
    out[f"classic-explorer-{STUCK}.json"] = partial(stuck_trace, "classic")
    for name in FLOWS:
        out[f"{name}.json"] = partial(flow_trace, name)
    for name, config in GAPS.items():
        out[name] = partial(gap_trace, config)
    return out


def main() -> None:
    made = {name: make() for name, make in deterministic().items()}
    made.update({f"{v}-hypothesis-{TARGET}.json": hypothesis_trace(v) for v in TWINS})
    for name, trace in made.items():
        save(trace, CORPUS / name)
        print(f"{CORPUS / name}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
