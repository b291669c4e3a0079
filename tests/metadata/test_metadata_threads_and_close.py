"""MD-I9 (where an op future completes) and MD-I10 (what a closed store does with a call) on the reference.

The planted bugs `metadata-complete-on-backend-thread`, `metadata-flush-after-close-reaches-backend` and
`metadata-call-after-close-reaches-backend` are their twins through `check`; these tests pin the records the oracles
read (the World's `submitted_on` / `completed_on`) and each oracle's verdict on a short walk, both ways.
"""

from __future__ import annotations

from models.core import Action
from models.metadata import EXPLORE_CONFIGS
from properties.engines.lockstep import Lockstep
from properties.metadata.binding import MetadataReference, make_model
from reference_impl.metadata import AlreadyClosedError, World


def _walk(config: str, actions: list[Action], settle: bool = False) -> MetadataReference:
    """Replay `actions` in lockstep on a configuration, then (`settle`) the first enabled `run` until there is
    none; every step must pass."""
    cfg = EXPLORE_CONFIGS[config]
    reference = MetadataReference(cfg, "pip453")
    lockstep = Lockstep(make_model(cfg, "pip453"), reference)

    def step(action: Action) -> None:
        outcome = lockstep.apply(action)
        assert not outcome.failures, (action, outcome.failures, outcome.detail)

    for action in actions:
        step(action)
    while settle and (runs := [a for a in lockstep.model.enabled(lockstep.state) if a.name == "run"]):
        step(runs[0])
    return reference


def test_a_future_records_the_thread_that_submitted_and_completed_it(world: World) -> None:
    client, other = world.thread("client"), world.thread("other")
    futures = []

    def submit() -> None:
        futures.append(world.future("op"))
        world.register_op(futures[-1])

    client.execute(submit)
    world.step(("run", client))
    other.execute(lambda: futures[0].complete(1))
    other.execute(lambda: futures[0].complete(2))
    world.step(("run", other))
    world.step(("run", other))
    assert (futures[0].submitted_on, futures[0].completed_on, futures[0].result()) == ("client", "other", 1)


def test_a_zk_op_completes_on_the_event_thread() -> None:
    reference = _walk("small", [Action.of("put", c=0, p="/a"), Action.of("advance")], settle=True)
    try:
        (future,) = reference.world.op_futures
        assert (future.submitted_on, future.completed_on) == ("client-0", "N-event")
        assert "MD-I9" not in reference.violations()
        future.completed_on = "N-backend"  # what the PIP text's "don't switch threads" would record
        assert "MD-I9" in reference.violations()
    finally:
        reference.close()


def test_a_memory_op_completes_on_its_caller() -> None:
    reference = _walk("memory", [Action.of("put", c=1, p="/a")])
    try:
        (future,) = reference.world.op_futures
        assert future.submitted_on == future.completed_on == "client-1"
        assert "MD-I9" not in reference.violations()
    finally:
        reference.close()


def test_a_call_after_close_fails_at_once_and_reaches_no_backend() -> None:
    reference = _walk("memory", [Action.of("close"), Action.of("put", c=0, p="/a")])
    try:
        (future,) = reference.ledger
        assert isinstance(future.exception(), AlreadyClosedError)
        assert reference.store.backend.tree.data == {"/a": (b"0", 0)}
        assert "MD-I10" not in reference.violations()
        reference.store.backend.tree.data["/a"] = (b"9", 1)  # a write that reached the backend after close
        reference.apply(Action.of("close"))
        assert "MD-I10" in reference.violations()
    finally:
        reference.close()
