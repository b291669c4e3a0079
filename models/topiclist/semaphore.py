"""The semaphore scope (``scope: "semaphore"``): one `AsyncSemaphore` (§4.1-4.5) driven directly
by the harness.

Its state `SemState`, its step world `_SemWorld` (the pools of `pools.py` with one pool, the hooks
inlined into the pass on the explorer's hot path) and `SemaphoreScope`, this scope's half of
`TopicListModel`: configuration, enabled actions, steps, projection and invariants. Separate from
`flows.py` because the two scopes share only the pools and the time actions.

**Actions** (snake_case, as the reference API)
    ``acquire(permits)``, ``update(permit, permits)`` (grow or shrink), ``release(permit)``,
    ``cancel(request)`` (caller `future.cancel()`), ``disconnect(request)`` (its `is_cancelled`
    turns true), ``close()``, ``step()`` (run the smallest due executor entry),
    ``advance(dt)`` (`advance_to(now + dt)`). Requests and permits are numbered from 0 in creation
    order (requests: every call that passes validation; permits: every grant).

**Observations**: requests return ``{"request", "status"[, "permit", "permits"]}`` or
``{"error": "ValueError", "message"}``; other actions return ``{"completed": [...]}`` (futures
completed during the step, in completion order).

**Config keys** (besides the common ones of `configs.py`)
    ``max_permits``      pool size (``<= 0``: unbounded)
    ``max_queue_size``   queue bound (``<= 0``: unbounded)
    ``timeout_ms``       acquire timeout (the deferred pass runs at ``timeout_ms // 2``)
    ``sizes``            permit counts offered to ``acquire`` and ``update``
    ``invalid_sizes``    also offer the two invalid counts (-1 and max+1) that raise ValueError
    ``release_zero``     also offer ``release`` of permits whose value is already 0 (no-ops)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from models.core import Action, ActionNotEnabled, ConfigReader, Invariant, Json, Observation, Param, int_param
from models.topiclist.common import (
    DEFERRED,
    GRANTED,
    LONG_MAX,
    PASS,
    PENDING,
    S_CALLER,
    S_CANCELLED,
    S_CLOSED,
    S_QUEUE_FULL,
    S_TIMEOUT,
    STATUS_NAMES,
    TIMEOUT,
    TMASK,
    TSHIFT,
    QEntry,
    insert_entry,
    make_entry,
    negative_message,
    too_large_message,
    tuple_insert_entry,
)
from models.topiclist.pools import Pools
from models.topiclist.scope import ScopeBase

# A semaphore-scope request is an int: status | is_cancelled flag << 3 | was queued << 4 |
# (granted permit id + 1) << 5.
_FLAG = 8
_QUEUED = 16
_PSHIFT = 5


class SemState(NamedTuple):
    """A state of the semaphore scope."""

    now: int
    avail: int
    closed: bool
    queue: tuple[QEntry, ...]
    grants: int  # queued grants (one wait observation each)
    timeouts: int  # Timeout failures (one counter increment and one wait observation each)
    execq: tuple[int, ...]
    reqs: tuple[int, ...]  # by request id, encoded as above
    permits: tuple[int, ...]  # permit values by permit id


class _SemWorld(Pools):
    """The semaphore scope: requests and permits are the harness's."""

    __slots__ = ("completed", "permits", "reqs")

    def __init__(self, m: SemaphoreScope, s: SemState) -> None:  # no super() call: hot path
        self.maxp = m.pool_max
        self.maxq = m.pool_queue
        self.tmo = m.pool_timeout
        self.now = s.now
        self.execq = list(s.execq)
        self.avail = [s.avail]
        self.closed = [s.closed]
        self.queues = [list(s.queue)]
        self.grants = [s.grants]
        self.timeouts = [s.timeouts]
        self.reqs = list(s.reqs)
        self.permits = list(s.permits)
        self.completed: list[Json] = []

    def is_cancelled(self, rid: int) -> bool:
        return self.reqs[rid] & _FLAG != 0

    def future_done(self, rid: int) -> bool:
        return self.reqs[rid] & 7 != PENDING

    def prev_value(self, rid: int, prev: int) -> int:
        return self.permits[prev]

    def swap_prev(self, rid: int, prev: int) -> int:
        v = self.permits[prev]
        self.permits[prev] = 0
        return v

    def on_grant(self, pool: int, rid: int, n: int) -> None:
        pid = len(self.permits)
        self.permits.append(n)
        self.reqs[rid] = (self.reqs[rid] & (_FLAG | _QUEUED)) | GRANTED | ((pid + 1) << _PSHIFT)
        self.completed.append({"request": rid, "status": "granted", "permit": pid, "permits": n})

    def on_fail(self, pool: int, rid: int, status: int) -> None:
        self.reqs[rid] = (self.reqs[rid] & (_FLAG | _QUEUED)) | status
        self.completed.append({"request": rid, "status": STATUS_NAMES[status]})

    def on_retry(self, rid: int) -> None:  # pragma: no cover - no retries in this scope
        raise AssertionError("no retry entries in the semaphore scope")

    def run_pass(self, pool: int) -> None:
        """`Pools.run_pass` with the hooks inlined (the explorer's hottest path)."""
        q = self.queues[0]
        if self.closed[0]:
            return
        reqs = self.reqs
        permits = self.permits
        av = self.avail[0]
        while q and av > 0:
            rid, n, prev = q[0]
            r = reqs[rid]
            if r & _FLAG:
                self.cancel_timeout(0, rid)
                del q[0]
                if r & 7 == PENDING:
                    self.on_fail(0, rid, S_CANCELLED)
                continue
            if r & 7 != PENDING:
                self.cancel_timeout(0, rid)
                del q[0]
                continue
            if prev >= 0:
                old = permits[prev]
                if n - old > av:
                    break
                permits[prev] = 0
                av -= n - old
            else:
                if n > av:
                    break
                av -= n
            self.cancel_timeout(0, rid)
            del q[0]
            self.grants[0] += 1
            pid = len(permits)
            permits.append(n)
            reqs[rid] = (r & (_FLAG | _QUEUED)) | GRANTED | ((pid + 1) << _PSHIFT)
            self.completed.append({"request": rid, "status": "granted", "permit": pid, "permits": n})
        self.avail[0] = av

    def freeze(self) -> SemState:
        return SemState(
            self.now,
            self.avail[0],
            self.closed[0],
            tuple(self.queues[0]),
            self.grants[0],
            self.timeouts[0],
            tuple(self.execq),
            tuple(self.reqs),
            tuple(self.permits),
        )


class SemaphoreScope(ScopeBase):
    """The semaphore scope's half of `TopicListModel`."""

    def _init_semaphore(self, cfg: Mapping[str, Param]) -> None:
        read = ConfigReader("topiclist", cfg)
        self.max_permits = read.integer("max_permits", default=4)
        self.pool_max = (self.max_permits,)
        self.pool_queue = (read.integer("max_queue_size", default=3),)
        self.pool_timeout = (read.integer("timeout_ms", default=100),)
        self.sizes = read.integers("sizes", default=(1, 2))
        self.invalid_sizes = read.flag("invalid_sizes", default=False)
        self.release_zero = read.flag("release_zero", default=False)
        self.bounded = self.max_permits > 0
        invalid: list[int] = [-1]
        if self.bounded:
            invalid.append(self.max_permits + 1)
        self.invalid: tuple[int, ...] = tuple(invalid) if self.invalid_sizes else ()
        self._acquire_actions = tuple(Action.of("acquire", permits=n) for n in self.sizes)
        self._invalid_acquires = tuple(Action.of("acquire", permits=n) for n in self.invalid)
        self._step_action = Action.of("step")
        self._close_action = Action.of("close")
        self._dt_actions = tuple(Action.of("advance", dt=d) for d in self.dts)
        self._upd_cache: dict[int, tuple[Action, ...]] = {}
        self._rel_cache: dict[int, Action] = {}
        self._cancel_cache: dict[int, Action] = {}
        self._disc_cache: dict[int, Action] = {}

    def _initial_sem(self, execq: tuple[int, ...]) -> SemState:
        return SemState(0, max(self.max_permits, 0), False, (), 0, 0, execq, (), ())

    def _enabled_sem(self, s: SemState) -> list[Action]:
        acts: list[Action] = []
        budget = len(s.reqs) < self.max_requests
        if budget:
            acts.extend(self._acquire_actions)
        acts.extend(self._invalid_acquires)
        perms = s.permits
        nsizes = len(self.sizes)
        for pid in range(len(perms)):
            ups = self._upd_cache.get(pid)
            if ups is None:
                ups = self._upd_cache[pid] = tuple(
                    Action.of("update", permit=pid, permits=n) for n in (*self.sizes, *self.invalid)
                )
            acts.extend(ups if budget else ups[nsizes:])
            if perms[pid] > 0 or self.release_zero:
                acts.append(self._rel_action(pid))
        for rid, r in enumerate(s.reqs):
            if r & 7 == PENDING:
                acts.append(self._cancel_action(rid))
                if not r & _FLAG:
                    acts.append(self._disc_action(rid))
        if self.allow_close and not s.closed:
            acts.append(self._close_action)
        self._time_actions(s.execq, acts)
        return acts

    def _rel_action(self, pid: int) -> Action:
        a = self._rel_cache.get(pid)
        if a is None:
            a = self._rel_cache[pid] = Action.of("release", permit=pid)
        return a

    def _cancel_action(self, rid: int) -> Action:
        a = self._cancel_cache.get(rid)
        if a is None:
            a = self._cancel_cache[rid] = Action.of("cancel", request=rid)
        return a

    def _disc_action(self, rid: int) -> Action:
        a = self._disc_cache.get(rid)
        if a is None:
            a = self._disc_cache[rid] = Action.of("disconnect", request=rid)
        return a

    def _validate(self, n: int) -> str | None:
        if n < 0:
            return negative_message(n)
        if self.bounded and n > self.max_permits:
            return too_large_message(n, self.max_permits)
        return None

    @staticmethod
    def _int_param(action: Action, names: tuple[str, ...]) -> tuple[int, ...]:
        """The action's int parameters, which must be exactly `names` (in `Action.of`'s sorted order)."""
        if [k for k, _ in action.params] != list(names):
            raise ActionNotEnabled(action, f"expected parameters {names}")
        return tuple([int_param(action, name) for name in names])

    def _step_sem(self, s: SemState, action: Action) -> tuple[SemState, Observation]:
        name = action.name
        if name == "acquire":
            (n,) = self._int_param(action, ("permits",))
            return self._sem_request(s, action, n, -1)
        if name == "update":
            pid, n = self._int_param(action, ("permit", "permits"))
            if not 0 <= pid < len(s.permits):
                raise ActionNotEnabled(action, "no such permit")
            return self._sem_request(s, action, n, pid)
        if name == "release":
            (pid,) = self._int_param(action, ("permit",))
            if not 0 <= pid < len(s.permits):
                raise ActionNotEnabled(action, "no such permit")
            r = s.permits[pid]
            if not (r > 0 or self.release_zero):
                raise ActionNotEnabled(action, "the permit is already released")
            if not self.bounded or r == 0:
                return s, {"completed": []}
            perms = s.permits
            return SemState(
                s.now,
                s.avail + r,
                s.closed,
                s.queue,
                s.grants,
                s.timeouts,
                s.execq if s.closed else tuple_insert_entry(s.execq, make_entry(0, PASS, 0, 0)),
                s.reqs,
                (*perms[:pid], 0, *perms[pid + 1 :]),
            ), {"completed": []}
        if name == "cancel" or name == "disconnect":
            (rid,) = self._int_param(action, ("request",))
            if not 0 <= rid < len(s.reqs) or s.reqs[rid] & 7 != PENDING:
                raise ActionNotEnabled(action, "the request is not pending")
            r = s.reqs[rid]
            reqs = s.reqs
            if name == "cancel":
                nr = (r & ~7) | S_CALLER
                obs: list[Json] = [{"request": rid, "status": "caller_cancelled"}]
            else:
                if r & _FLAG:
                    raise ActionNotEnabled(action, "already disconnected")
                nr = r | _FLAG
                obs = []
            return SemState(
                s.now,
                s.avail,
                s.closed,
                s.queue,
                s.grants,
                s.timeouts,
                s.execq,
                (*reqs[:rid], nr, *reqs[rid + 1 :]),
                s.permits,
            ), {"completed": obs}
        if name == "close":
            if action.params or not self.allow_close or s.closed:
                raise ActionNotEnabled(action, "close is not offered")
            if not s.queue:  # only the deferred pass to cancel
                low = (DEFERRED << 20) | (0 << 16)
                ex = s.execq
                for i in range(len(ex)):
                    if ex[i] & TMASK == low:
                        ex = (*ex[:i], *ex[i + 1 :])
                        break
                return SemState(s.now, s.avail, True, (), s.grants, s.timeouts, ex, s.reqs, s.permits), {
                    "completed": []
                }
            w = _SemWorld(self, s)
            w.close_pool(0)
            return w.freeze(), {"completed": w.completed}
        if name == "step" or name == "advance":
            self._check_time(s.execq, action)
            if name == "step" and self._noop_pass(s):
                return SemState(
                    s.now, s.avail, s.closed, s.queue, s.grants, s.timeouts, s.execq[1:], s.reqs, s.permits
                ), {"completed": []}
            w = _SemWorld(self, s)
            self._time_step(w, action)
            return w.freeze(), {"completed": w.completed}
        raise ActionNotEnabled(action, "unknown action")

    @staticmethod
    def _noop_pass(s: SemState) -> bool:
        """Whether the due head entry is a pass that can change nothing (head blocked or nothing to do)."""
        kind = (s.execq[0] >> 20) & 15
        if kind == TIMEOUT:
            return False
        if s.closed or not s.queue or s.avail <= 0:
            return True
        rid, n, prev = s.queue[0]
        r = s.reqs[rid]
        if r & _FLAG or r & 7 != PENDING:
            return False
        return n - (s.permits[prev] if prev >= 0 else 0) > s.avail

    def _sem_request(self, s: SemState, action: Action, n: int, pid: int) -> tuple[SemState, Observation]:
        if n not in self.sizes and n not in self.invalid:
            raise ActionNotEnabled(action, "permits is not one of the configured sizes")
        err = self._validate(n)
        if err is not None:
            return s, {"error": "ValueError", "message": err}
        rid = len(s.reqs)
        if rid >= self.max_requests:
            raise ActionNotEnabled(action, "the request budget is spent")
        if not self.bounded:
            newp = len(s.permits)
            return s._replace(reqs=(*s.reqs, GRANTED | ((newp + 1) << _PSHIFT)), permits=(*s.permits, n)), {
                "request": rid,
                "status": "granted",
                "permit": newp,
                "permits": n,
            }
        if pid >= 0:
            old = s.permits[pid]
            if n <= old:  # shrinking or equal update: synchronous, works even when closed
                perms = s.permits
                newp = len(perms)
                execq = s.execq if old == n or s.closed else tuple_insert_entry(s.execq, make_entry(0, PASS, 0, 0))
                return SemState(
                    s.now,
                    s.avail + old - n,
                    s.closed,
                    s.queue,
                    s.grants,
                    s.timeouts,
                    execq,
                    (*s.reqs, GRANTED | ((newp + 1) << _PSHIFT)),
                    (*perms[:pid], 0, *perms[pid + 1 :], n),
                ), {"request": rid, "status": "granted", "permit": newp, "permits": n}
        if s.closed:
            return s._replace(reqs=(*s.reqs, S_CLOSED)), {"request": rid, "status": "AlreadyClosed"}
        if 0 < self.pool_queue[0] <= len(s.queue):
            return s._replace(reqs=(*s.reqs, S_QUEUE_FULL)), {"request": rid, "status": "QueueFull"}
        ex = list(s.execq)
        insert_entry(ex, make_entry(self.pool_timeout[0], TIMEOUT, 0, rid))
        insert_entry(ex, make_entry(0, PASS, 0, 0))
        return SemState(
            s.now,
            s.avail,
            False,
            (*s.queue, (rid, n, pid)),
            s.grants,
            s.timeouts,
            tuple(ex),
            (*s.reqs, PENDING | _QUEUED),
            s.permits,
        ), {"request": rid, "status": "pending"}

    def _vars_sem(self, state: SemState) -> dict[str, Json]:
        now = state.now
        execq: list[Json] = [now + (e >> TSHIFT) for e in state.execq]
        reqs: list[Json] = []
        for r in state.reqs:
            d: dict[str, Json] = {"status": STATUS_NAMES[r & 7], "cancelled": bool(r & _FLAG)}
            if r & 7 == GRANTED:
                d["permit"] = (r >> _PSHIFT) - 1
            reqs.append(d)
        a = state.avail
        return {
            "now": now,
            "available_permits": a if self.bounded else LONG_MAX,
            "acquired_permits": self.max_permits - a if self.bounded else 0,
            "queue_size": len(state.queue),
            "closed": state.closed,
            "queue": [e[0] for e in state.queue],
            "requests": reqs,
            "permits": list(state.permits),
            "executor": execq,
            "timeouts": state.timeouts,
            "waits": state.grants + state.timeouts,
        }

    def _quiescent_sem(self, state: SemState) -> bool:
        """`TopicListModel.quiescent` in this scope: the executor is idle, nothing is queued and the
        harness holds no permit (every issued permit has value 0)."""
        if state.execq:
            return False
        return not state.queue and (not self.bounded or not any(state.permits))

    def _leak_free_sem(self, state: SemState) -> bool:
        """The pool, when bounded, back at its max."""
        return not self.bounded or state.avail == self.max_permits

    def _sem_invariants(self) -> list[Invariant[Any]]:
        mx = self.max_permits
        mq = self.pool_queue[0]
        bounded = self.bounded

        def i1(s: Any) -> bool:
            return not bounded or 0 <= s.avail <= mx

        def i2(s: Any) -> bool:
            return not bounded or mx - s.avail == sum(s.permits)

        def i3(s: Any) -> bool:
            if not s.queue:
                return True
            first = s.queue[0][0]  # the queue is in enqueue (= request id) order, see TL-I4
            for rid in range(first, len(s.reqs)):
                r = s.reqs[rid]
                if r & 7 == GRANTED and r & _QUEUED:
                    return False
            return True

        def i4(s: Any) -> bool:
            queue = s.queue
            last = -1
            for e in queue:  # queued in enqueue order, each request at most once
                if e[0] <= last:
                    return False
                last = e[0]
            for rid, r in enumerate(s.reqs):
                if r & 7 == PENDING:
                    if not s.execq:
                        return False
                    for e in queue:
                        if e[0] == rid:
                            break
                    else:
                        return False
            return True

        def i5(s: Any) -> bool:
            if bounded:
                for v in s.permits:
                    if v < 0 or v > mx:
                        return False
            return True

        def i6(s: Any) -> bool:
            return mq <= 0 or len(s.queue) <= mq

        def i7(s: Any) -> bool:
            return not self._quiescent_sem(s) or self._leak_free_sem(s)

        def i9(s: Any) -> bool:
            g = t = 0
            for r in s.reqs:
                st = r & 7
                if st == GRANTED and r & _QUEUED:
                    g += 1
                elif st == S_TIMEOUT:
                    t += 1
            return bool(s.grants == g and s.timeouts == t)

        def i10(s: Any) -> bool:
            for r in s.reqs:
                st = r & 7
                if st == S_CANCELLED and not r & _FLAG:
                    return False
                if st == GRANTED and r & _QUEUED and r & _FLAG:
                    return False
                if st in (S_TIMEOUT, S_CANCELLED, S_CALLER) and not r & _QUEUED:
                    return False
            return True

        return [
            Invariant("TL-I1", i1, "0 <= available <= max_permits"),
            Invariant("TL-I2", i2, "acquired == max - available == sum of the live permits' values"),
            Invariant(
                "TL-I3",
                i3,
                "FIFO grants: no request granted from the queue was enqueued after one still queued",
            ),
            Invariant(
                "TL-I4",
                i4,
                "exactly-once completion: a pending future is queued with its timeout scheduled; "
                "when the executor is idle no request future is pending",
            ),
            Invariant("TL-I5", i5, "every permit value is <= max_permits"),
            Invariant("TL-I6", i6, "queue_size <= max_queue_size when the queue is bounded"),
            Invariant(
                "TL-I7",
                i7,
                "no permit leak at quiescence: with the executor idle, nothing queued and every "
                "issued permit released, acquired_permits == 0",
            ),
            Invariant(
                "TL-I9",
                i9,
                "metrics agree with state: the timeout counter equals the number of Timeout outcomes "
                "and the wait observations equal queued grants + timeouts",
            ),
            Invariant(
                "TL-I10",
                i10,
                "outcome attribution: Cancelled only with is_cancelled() true, a queued grant only "
                "with it false, Timeout / Cancelled / caller-cancelled only for queued requests",
            ),
        ]
