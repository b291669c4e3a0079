"""`TopicListModel`: the model class of the mechanism, on top of the two scopes' halves
(`semaphore.py`, `flows.py`). It reads the common configuration keys, picks the scope, and
dispatches the model protocol (initial state, key, enabled actions, step, projection, quiescence
and invariants) to the scope of the state.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import cast

from models.core import Action, ConfigReader, Invariant, Json, Liveness, Observation, Param, check_arguments
from models.topiclist.common import DEFERRED, insert_entry, make_entry
from models.topiclist.configs import CONFIG_KEYS, EXPLORE_CONFIG, VARIANTS
from models.topiclist.flow_state import FlowState
from models.topiclist.flows import FLOW_ACTIONS, FLOW_HARNESS, FlowsScope
from models.topiclist.semaphore import SemaphoreScope, SemState

TLState = SemState | FlowState
"""A model state. `key` leaves out `now` (the first field of both) and, in the flows scope, the
metric counters `stats` (the last field), which watcher retries could grow without bound."""


class TopicListModel(SemaphoreScope, FlowsScope):
    """The topic-list limiter model (`mechanism = "topiclist"`), for one config and variant."""

    mechanism = "topiclist"
    terminal_ok = symmetric_key = threaded = None
    """No optional member of `Model`: a state without an enabled action is a deadlock, no values are alike, and
    the actions are no threads' steps."""

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        check_arguments(self.mechanism, variant, VARIANTS, config, CONFIG_KEYS)
        cfg: dict[str, Param] = dict(EXPLORE_CONFIG if config is None else config)
        read = ConfigReader("topiclist", cfg)
        self.config: Mapping[str, Param] = cfg
        self.variant = variant
        self.current = variant == "current"
        scope = cfg.get("scope", "semaphore")
        if scope not in ("semaphore", "flows"):
            raise ValueError(f"topiclist config 'scope' must be 'semaphore' or 'flows', not {scope!r}")
        self.scope: str = str(scope)
        self.dts = read.integers("dts", default=())
        self.advance_next = read.flag("advance_next", default=True)
        self.max_requests = read.integer("max_requests", default=4)
        self.allow_close = read.flag("allow_close", default=True)
        self._adv_cache: dict[int, Action] = {}
        if self.scope == "semaphore":
            self._init_semaphore(cfg)
            names = ["acquire", "update", "release", "cancel", "disconnect"]
        else:
            self._init_flows(cfg)
            names = list(dict.fromkeys(n for f, n in FLOW_ACTIONS if f in self.flows or f == "*"))
            names += [n for flag, n in FLOW_HARNESS if getattr(self, flag)]
        if self.allow_close:
            names.append("close")
        self.action_names: Sequence[str] = (*names, "step", "advance")
        self.idle_dt = min(self.pool_timeout)
        """The clock advance offered when the executor is idle and `dts` is empty."""
        self._idle_actions = self._dt_actions or (Action.of("advance", dt=self.idle_dt),)
        self.invariants: Sequence[Invariant[TLState]] = self._invariants()
        self.liveness: Sequence[Liveness[TLState]] = [
            Liveness(
                "TL-L1",
                self.quiescent_and_free,
                "from every reachable state, a quiescent state with nothing acquired (and every "
                "lookup permit back) is reachable",
            )
        ]

    # Model protocol ------------------------------------------------------------------------
    def initial(self) -> TLState:
        npools = len(self.pool_max)
        execq: list[int] = []
        for p in range(npools):
            if self.pool_max[p] > 0:
                insert_entry(execq, make_entry(self.pool_timeout[p] // 2, DEFERRED, p, 0))
        if self.scope == "semaphore":
            return self._initial_sem(tuple(execq))
        return self._initial_flows(tuple(execq))

    def key(self, state: TLState) -> Hashable:
        """Everything but `now` (behaviour depends on time differences only) and, for flows, the
        metric counters."""
        if type(state) is SemState:
            return state[1:]
        return state[1:-1]

    def enabled(self, state: TLState) -> Sequence[Action]:
        if type(state) is SemState:
            return self._enabled_sem(state)
        return self._enabled_flows(cast(FlowState, state))

    def step(self, state: TLState, action: Action) -> tuple[TLState, Observation]:
        if type(state) is SemState:
            return self._step_sem(state, action)
        return self._step_flows(cast(FlowState, state), action)

    # projection and properties -----------------------------------------------------------------
    def vars(self, state: TLState) -> dict[str, Json]:
        if type(state) is SemState:
            return self._vars_sem(state)
        return self._vars_flows(cast(FlowState, state))

    def acquired(self, state: TLState, pool: int = 0) -> int:
        """`acquired_permits` of pool `pool` (0 = the semaphore / heap, 1 = direct, ...)."""
        mx = self.pool_max[pool]
        if mx <= 0:
            return 0
        if type(state) is SemState:
            return mx - state.avail
        return mx - cast(FlowState, state).avail[pool]

    def quiescent(self, state: TLState) -> bool:
        """TL-I7's and TL-I8's premise (§5): nothing more can happen without new client input (each
        scope says what that means). A request still unanswered here never will be: TL-I8 judges it
        (the premise does not assume that every request was answered).
        """
        if type(state) is SemState:
            return self._quiescent_sem(state)
        return self._quiescent_flows(cast(FlowState, state))

    def quiescent_and_free(self, state: TLState) -> bool:
        if type(state) is SemState:
            return self._quiescent_sem(state) and self._leak_free_sem(state)
        fs = cast(FlowState, state)
        return self._quiescent_flows(fs) and self._leak_free_flows(fs)

    def _invariants(self) -> list[Invariant[TLState]]:
        if self.scope == "semaphore":
            return self._sem_invariants()
        return self._flow_invariants()
