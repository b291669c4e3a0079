"""The delayed-delivery model on the spec's worked examples (§7), its arithmetic, and its properties' teeth."""

from __future__ import annotations

import pytest

import models.delayed as delayed
from models.core import Action, Json, Observation, Param, violated
from models.delayed import (
    ACTION_NAMES,
    EXPLORE_CONFIG,
    HYPOTHESIS_CONFIG,
    DelayedModel,
    DelayedState,
    bitmap_bytes,
)
from properties.engines.explorer import explore


class Drive:
    """Steps one model by hand, checking that every action taken is one the model enables."""

    def __init__(self, variant: str = "current", **config: Param) -> None:
        self.model = DelayedModel({**EXPLORE_CONFIG, **config}, variant)
        self.state = self.model.initial()

    def do(self, name: str, **params: Param) -> Observation:
        action = Action.of(name, **params)
        assert action in self.model.enabled(self.state), f"{action} is not enabled"
        self.state, observation = self.model.step(self.state, action)
        return observation

    def add(self, ledger: int, entry: int, deliver_at: int) -> bool:
        """A read; True if it was delivered at once."""
        observation = self.do("add", ledger=ledger, entry=entry, deliver_at=deliver_at)
        assert observation is not None
        return observation["delivered"] is True

    def offered(self, limit: int) -> Json:
        observation = self.do("get_scheduled", limit=limit)
        assert observation is not None
        return observation["offered"]

    def var(self, name: str) -> Json:
        return self.model.vars(self.state)[name]

    @property
    def violated(self) -> list[str]:
        return violated(self.model, self.state)


E1_MESSAGES = [((1, 2), 20), ((2, 1), 10), ((3, 3), 30), ((4, 5), 50), ((5, 4), 40)]


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e1_tick_one_both_variants_agree(variant: str) -> None:
    run = Drive(
        variant,
        tick=1,
        ledgers=(1, 2, 3, 4, 5, 6),
        entries=(1, 2, 3, 4, 5, 6),
        max_deliver_at=100,
        limits=(1, 3, 10),
        lookahead=0,
        extra_deliver_at=(10, 20, 30, 40, 50),
        extra_now=(15, 60),
    )
    assert [run.add(ledger, entry, d) for (ledger, entry), d in E1_MESSAGES] == [False] * 5
    assert run.var("count") == 5
    assert run.offered(10) == []
    run.do("advance", now=15)
    assert run.add(6, 6, 10) is True
    assert run.var("count") == 5
    assert run.offered(10) == [[2, 1]]
    run.do("advance", now=60)
    assert run.var("count") == 4
    assert run.offered(1) == [[1, 2]]
    assert run.var("count") == 3
    assert run.offered(3) == [[3, 3], [4, 5], [5, 4]]
    assert run.var("count") == 0
    assert run.offered(10) == []
    assert run.violated == []


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e3_non_strict_cutoff_and_keys(variant: str) -> None:
    run = Drive(
        variant,
        tick=100,
        entries=(0, 1, 2, 3, 4),
        ledgers=(1,),
        max_deliver_at=300,
        extra_deliver_at=(10, 99, 100, 101, 200),
    )
    assert run.model.precision == 64
    delivered = [run.add(1, i, d) for i, d in enumerate([10, 99, 100, 101, 200])]
    assert delivered == [True, True, True, False, False]
    assert run.var("count") == 2
    assert run.var("buckets") == [[64, 1, 3], [192, 1, 4]]


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e4_strict_tick_one(variant: str) -> None:
    run = Drive(variant, tick=1, strict=True, ledgers=(1, 2, 3), entries=(1, 2, 3), max_deliver_at=20, extra_now=(10,))
    run.do("advance", now=10)
    assert [run.add(3, 3, 9), run.add(2, 2, 10), run.add(1, 1, 11)] == [True, True, False]
    assert run.var("count") == 1
    assert run.offered(1) == []
    assert run.violated == []


def test_e4_strict_tick_100_current_is_not_available_and_pr23611_offers_one_ms_early() -> None:
    runs = {}
    for variant in ("current", "pr23611"):
        run = runs[variant] = Drive(
            variant,
            tick=100,
            strict=True,
            ledgers=(1, 2, 3),
            entries=(1, 2, 3),
            max_deliver_at=200,
            extra_now=(10,),
            extra_deliver_at=(9,),
        )
        run.do("advance", now=10)
        assert [run.add(3, 3, 9), run.add(2, 2, 10), run.add(1, 1, 11)] == [True, True, False]
    assert runs["current"].var("buckets") == [[64, 1, 1]]
    assert runs["current"].offered(2) == []
    assert runs["current"].violated == []
    assert runs["pr23611"].var("buckets") == [[0, 1, 1]]
    assert runs["pr23611"].offered(2) == [[1, 1]]  # at now 10, D = 11
    assert runs["pr23611"].violated == ["DD-I1", "DD-I9"]
    assert runs["pr23611"].var("buckets") == [[0, 1, 1]]  # withheld again: a wasted replay


E11: dict[str, Param] = {
    "tick": 1000,
    "strict": True,
    "ledgers": (1, 2),
    "entries": (1, 2),
    "max_deliver_at": 62_000,
    "limits": (100,),
    "round_size": 100,
    "extra_deliver_at": (60400, 61000),
    "extra_now": (60000,),
}


def test_e11_current_strict_timer_walkthrough() -> None:
    run = Drive("current", **E11)
    assert [run.add(1, 1, 60400), run.add(2, 2, 61000)] == [False, False]
    assert run.var("buckets") == [[60416, 1, 1], [61440, 2, 2]]
    assert run.var("timer") == [60416, 60416]
    run.do("advance", now=60000)
    assert run.offered(100) == []
    assert run.var("timer") == [60416, 60416]
    run.do("advance", now=60416)
    assert run.do("fire") == {"offered": [[1, 1]], "delivered": [[1, 1]]}
    assert run.var("count") == 1
    assert run.var("timer") == [61440, 61440]  # delay = max(1024, 60416 + 1000 - 60416)
    assert run.var("last_tick_run") == 60416
    run.do("advance", now=61440)
    assert run.do("fire") == {"offered": [[2, 2]], "delivered": [[2, 2]]}
    assert (run.var("count"), run.var("timer")) == (0, [])
    assert run.violated == []


def test_e11_pr23611_offers_400_ms_early() -> None:
    run = Drive("pr23611", **E11)
    run.add(1, 1, 60400)
    run.add(2, 2, 61000)
    assert run.var("buckets") == [[59904, 1, 1], [60928, 2, 2]]
    run.do("advance", now=60000)
    assert run.offered(100) == [[1, 1]]
    assert run.violated == ["DD-I1", "DD-I9"]


def first_offer_and_delivery(variant: str, strict: bool) -> tuple[int, int]:
    """The worked example table: T = 1000, D = 60400, one round per ms."""
    run = Drive(
        variant,
        tick=1000,
        strict=strict,
        ledgers=(1,),
        entries=(1,),
        max_deliver_at=62_000,
        extra_deliver_at=(60400,),
        extra_now=(58000,),
    )
    run.add(1, 1, 60400)
    run.do("advance", now=58000)
    offer = None
    while True:
        observation = run.do("get_scheduled", limit=1)
        assert observation is not None
        if observation["offered"] and offer is None:
            offer = run.state.now
        if observation["delivered"]:
            assert offer is not None
            return offer, run.state.now
        run.do("advance", now=run.state.now + 1)


@pytest.mark.parametrize(
    ("variant", "strict", "offer", "delivery"),
    [
        ("pr23611", False, 58904, 59400),
        ("pr23611", True, 59904, 60400),
        ("current", False, 59415, 59415),
        ("current", True, 60416, 60416),
    ],
)
def test_worked_example_table(variant: str, strict: bool, offer: int, delivery: int) -> None:
    assert first_offer_and_delivery(variant, strict) == (offer, delivery)


def test_current_offers_late_by_exactly_the_dd_i10_amount() -> None:
    d, precision = 60400, 512
    legacy_non_strict, legacy_strict = d - 1000, d  # legacy offers as soon as D <= C(now)
    assert first_offer_and_delivery("current", False)[0] - legacy_non_strict == precision - 1 - d % precision
    assert first_offer_and_delivery("current", True)[0] - legacy_strict == -(-d // precision) * precision - d


def test_bitmap_bytes_closed_form_examples() -> None:
    assert bitmap_bytes([7]) == 30
    assert bitmap_bytes(list(range(1024))) == 2076
    assert bitmap_bytes(list(range(5000))) == 8220
    assert bitmap_bytes([0, 2**16, 2**32]) == 8 + 12 * 2 + 3 * 10


def test_memory_and_keys_follow_the_mode() -> None:
    run = Drive("current", tick=3, strict=True)
    run.add(1, 0, 3)
    assert run.var("buckets") == [[4, 1, 0]]  # round_up(3) with P = 2
    assert run.var("memory") == 30
    run = Drive("current", tick=3)
    run.add(1, 0, 5)
    assert run.var("buckets") == [[4, 1, 0]]  # trim(5)


def test_vars_are_json_without_null() -> None:
    model = DelayedModel(HYPOTHESIS_CONFIG)
    state = model.initial()
    for action in [Action.of("add", ledger=1, entry=0, deliver_at=1001), Action.of("clear")]:
        state, _ = model.step(state, action)
    names = {"now", "buckets", "count", "memory", "highest", "fixed", "timer", "last_tick_run", "deliver_at"}
    values = model.vars(state)
    assert set(values) == names
    assert "None" not in repr(values)
    assert model.action_names == ACTION_NAMES


@pytest.mark.parametrize(
    ("config", "variant", "message"),
    [
        ({"tick": 0}, "current", "tick"),
        ({"strict": 1}, "current", "strict"),
        ({"limits": ()}, "current", "limits"),
        ({"nope": 1}, "current", "unknown config key"),
        ({}, "legacy", "unknown variant"),
    ],
)
def test_bad_configs_are_rejected(config: dict[str, Param], variant: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DelayedModel(config, variant)


def test_actions_outside_the_choices_are_not_enabled() -> None:
    from models.core import ActionNotEnabled

    model = DelayedModel()
    state, _ = model.step(model.initial(), Action.of("add", ledger=1, entry=0, deliver_at=5))
    for action in [
        Action.of("add", ledger=1, entry=0, deliver_at=6),  # not the message's own D
        Action.of("add", ledger=9, entry=0, deliver_at=5),  # no such position
        Action.of("advance", now=0),  # backwards
        Action.of("get_scheduled", limit=7),
        Action.of("fire"),  # the handle is due at 4
        Action.of("run", handle="mine"),
        Action.of("close"),
    ]:
        assert action not in model.enabled(state)
        with pytest.raises(ActionNotEnabled):
            model.step(state, action)


def test_a_bool_or_float_parameter_is_refused_even_after_the_equal_int_one_was_taken() -> None:
    """`1 == True == 1.0`, so the parse cache must not answer for an equal action of other types."""
    from models.core import ActionNotEnabled

    model = DelayedModel()
    state, _ = model.step(model.initial(), Action.of("add", ledger=1, entry=0, deliver_at=5))
    for action in [Action.of("add", ledger=True, entry=0, deliver_at=5),
                   Action.of("add", ledger=1, entry=0, deliver_at=5.0)]:  # type: ignore[arg-type]  # a float, on purpose
        assert action == Action.of("add", ledger=1, entry=0, deliver_at=5)
        with pytest.raises(ActionNotEnabled, match="must be an int"):
            model.step(model.initial(), action)
    assert model.step(model.initial(), Action.of("add", ledger=1, entry=0, deliver_at=5))[0] == state


# ----- every property can fail: hand-made bad states and planted bugs -----


def test_state_invariants_reject_bad_states() -> None:
    model = DelayedModel()
    good = DelayedState(0, ((4, 0),), 1, 5, True, (4, 4), 0, (5, None), 1, 1, False, frozenset())
    assert violated(model, good) == []
    assert violated(model, good._replace(tracked_count=2)) == ["DD-I5"]
    assert violated(model, good._replace(timer=None)) == ["DD-I6"]
    assert violated(model, good._replace(timer=(2, 2))) == ["DD-I6"]
    assert violated(model, good._replace(tracked=(), tracked_count=0, pending=0)) == ["DD-I6"]
    assert violated(model, good._replace(tracked=(), tracked_count=0, pending=0, stale=True)) == []
    assert violated(model, good._replace(pending=0)) == ["DD-I3"]
    assert violated(model, good._replace(tracked=((2, 0),), timer=(2, 2))) == ["DD-I3"]  # wrong key for D = 5


def _explore_findings(model: DelayedModel) -> dict[str, int]:
    result = explore(model, stop_on_violation=True, check_liveness=False)
    return {f.name: len(f.path) for f in result.findings}


def test_dd_i2_catches_a_dispatcher_that_skips_the_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    original = delayed._Step.add_message
    monkeypatch.setattr(
        delayed._Step, "add_message", lambda self, pos, d: original(self, pos, d) if not self.offered else False
    )
    assert "DD-I2" in _explore_findings(DelayedModel(variant="pr23611"))


def test_dd_i3_and_dd_i4_catch_a_wrong_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    original = delayed._Step.get_scheduled
    monkeypatch.setattr(delayed._Step, "get_scheduled", lambda self, n: original(self, min(n, 1)))
    assert "DD-I3" in _explore_findings(DelayedModel())  # a round with room left leaves a due message
    monkeypatch.setattr(delayed._Step, "get_scheduled", lambda self, n: _drain_last(self, original))
    assert "DD-I4" in _explore_findings(DelayedModel())


def _drain_last(step: delayed._Step, original: object) -> list[int]:
    """Drain the largest due entry instead of the smallest."""
    cut = step.now + step.m.bc_offset
    due = [t for t in step.tracked if t[0] <= cut]
    if len(due) < 2:
        return original(step, 1)  # type: ignore[operator, no-any-return]
    step.tracked.remove(due[-1])
    step.count -= 1
    step.pending &= ~(1 << due[-1][1])
    step.update_timer()
    return [due[-1][1]]


def test_dd_i10_and_dd_i1_catch_a_wrong_bucket_cutoff() -> None:
    late = DelayedModel()
    late.bc_offset -= 2  # offers a bucket 2 ms later than current
    assert "DD-I10" in _explore_findings(late)
    early = DelayedModel()
    early.bc_offset += 1
    assert "DD-I1" in _explore_findings(early)


def test_dd_l1_catches_messages_that_can_never_fall_due() -> None:
    model = DelayedModel({**EXPLORE_CONFIG, "strict": True})
    model.horizon = 4  # the clock stops before the keys round_up(5) = round_up(6) = 6
    result = explore(model, check_liveness=True)
    assert [f.name for f in result.findings] == ["DD-L1"]
