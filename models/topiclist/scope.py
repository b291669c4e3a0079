"""`ScopeBase`: what the two scopes' halves of `TopicListModel` share, i.e. the attributes the
model's constructor sets and the time actions ``step`` and ``advance`` that both scopes offer.

Separate so that `semaphore.py` and `flows.py` can each hold one scope's half of the model class
without importing each other or `model.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Action, ActionNotEnabled, Param, int_param
from models.topiclist.common import TSHIFT, TUNIT
from models.topiclist.pools import Pools


class ScopeBase:
    """The attributes and time actions both scopes use (set by `TopicListModel.__init__` and the
    scopes' `_init_*`)."""

    config: Mapping[str, Param]
    variant: str
    current: bool
    scope: str
    dts: tuple[int, ...]
    advance_next: bool
    max_requests: int
    allow_close: bool
    idle_dt: int
    pool_max: tuple[int, ...]
    pool_queue: tuple[int, ...]
    pool_timeout: tuple[int, ...]
    _adv_cache: dict[int, Action]
    _idle_actions: tuple[Action, ...]
    _step_action: Action
    _dt_actions: tuple[Action, ...]

    # time actions shared by both scopes ------------------------------------------------------
    def _time_actions(self, execq: tuple[int, ...], acts: list[Action]) -> None:
        if not execq:  # time may still pass: no state is terminal (a self-loop for `key`)
            acts.extend(self._idle_actions)
            return
        if execq[0] < TUNIT:
            acts.append(self._step_action)
        acts.extend(self._dt_actions)
        if self.advance_next:
            for e in execq:
                if e >= TUNIT:
                    d = e >> TSHIFT
                    if d not in self.dts:
                        a = self._adv_cache.get(d)
                        if a is None:
                            a = self._adv_cache[d] = Action.of("advance", dt=d)
                        acts.append(a)
                    break

    def _check_time(self, execq: tuple[int, ...], action: Action) -> None:
        if action.name == "step":
            if action.params:
                raise ActionNotEnabled(action, "step takes no parameters")
            if not execq or execq[0] >= TUNIT:
                raise ActionNotEnabled(action, "no executor entry is due")
            return
        ps = action.params
        if len(ps) != 1 or ps[0][0] != "dt":
            raise ActionNotEnabled(action, "advance takes one parameter, dt")
        dt = ps[0][1]
        if dt in self.dts or (not execq and dt == self.idle_dt):
            return
        nxt = next((e >> TSHIFT for e in execq if e >= TUNIT), None)
        if not (self.advance_next and dt == nxt):
            raise ActionNotEnabled(action, f"dt={dt!r} is not offered")

    @staticmethod
    def _time_step(w: Pools, action: Action) -> None:
        if action.name == "step":
            w.run_entry()
        else:
            w.advance(int_param(action, "dt"))
