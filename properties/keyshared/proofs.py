"""Z3 encoding of the Key_Shared dispatcher for bounded proofs of KS-I1 (pip379) and its classic twin.

The encoding is the model (`models.keyshared`) restricted to what KS-I1 depends on: reads of one
entry (`read_batch_size=1`), distinct consumer names (so the ring depends only on who is connected;
`ring_table` checks that no points collide), and the steps add, remove, publish, flow, ack and read.
Each message has one status (fresh, queued for replay, acked, or pending at a consumer slot), which
is also what the consumer holds: in this fragment `held(C)` equals C's pending acks. The owners of
the key hashes for every set of connected consumers are computed in Python with the exact ring and
become a lookup table. What only schedules reads (`scheduled_read`, `blocked_count`) is left out,
since `read` is always possible here.

pip379 also states `KS-I2` (tracker entries match the drainer's pending acks) and `KS-W`
(well-formedness: statuses, bounds, pending only at connected consumers, and a consumer that holds a
hash it does not own is draining it). Their conjunction with KS-I1 is what k-induction closes; BMC
is the fallback. The twin is `classic` (the 3.x read-position gate), whose shortest KS-I1
counterexample is a read racing a consumer change (§6a).

Every counterexample decodes to model actions (consumer ids are tracked per slot, so `decode` needs
nothing but the choice frame), and `frame_of` maps a model state to a concrete frame, so the tests
replay Z3's counterexamples on the model and check the transition relation against model runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import z3

from models.core import Action, Param
from models.keyshared import KeySharedModel, KSState, build_ring, sticky_hash
from properties.engines.bmc import Frame, ProofResult, Sort, SymbolicSystem, bmc, prove

NAMES = ("consumer1", "consumer2")
KEYS = ("0", "4")  # "0" moves from consumer1 to consumer2 when consumer2 joins; "4" stays with consumer1
MESSAGES = 3
ADD_PERMITS = (0, 1, 2)
MAX_PERMITS = 2
ACTIONS = ("add", "remove", "publish", "flow", "ack", "read")
FRESH, QUEUED, ACKED, PENDING = 0, 1, 2, 3  # status PENDING + s: pending at slot s
NONE = -1


def model_config(
    names: Sequence[str] = NAMES, keys: Sequence[str] = KEYS, messages: int = MESSAGES
) -> dict[str, Param]:
    """The model configuration whose runs (without same-name consumers) the encoding describes."""
    return {
        "names": tuple(names),
        "keys": tuple(keys),
        "max_consumers": len(names),
        "same_name": False,
        "max_messages": messages,
        "add_permits": ADD_PERMITS,
        "flow": (1,),
        "max_permits": MAX_PERMITS,
        "read_batch_size": 1,
        "actions": ACTIONS,
    }


def ring_table(names: Sequence[str], keys: Sequence[str], points: int = 3, range_max: int = 65535) -> list[list[int]]:
    """table[mask][k]: the slot owning key k when the slots in `mask` are connected (NONE if empty)."""
    hashes = [sticky_hash(k, range_max) for k in keys]
    if len(set(hashes)) != len(keys):
        raise ValueError("the keys must have distinct hashes")
    all_points = [sticky_hash(f"{n}\x000\x00{i}", range_max) for n in names for i in range(points)]
    if len(set(all_points)) != len(all_points):
        raise ValueError("ring points collide: the owner would depend on the join order")
    table = []
    for mask in range(1 << len(names)):
        slots = [s for s in range(len(names)) if mask >> s & 1]
        ring = build_ring([(names[s], 0) for s in slots], points, range_max, hashes)
        table.append([slots[ring.owners[h]] if slots else NONE for h in hashes])
    return table


def _pick(values: Sequence[z3.ExprRef], index: z3.ArithRef) -> z3.ExprRef:
    """values[index] for a symbolic index (the first value when out of range)."""
    out = values[0]
    for i in range(1, len(values)):
        out = z3.If(index == i, values[i], out)
    return out


def _count(conditions: Sequence[z3.BoolRef]) -> z3.ArithRef:
    return z3.Sum(*[z3.If(c, 1, 0) for c in conditions]) if conditions else z3.IntVal(0)


class _Encoding:
    """Helpers over one configuration: slots, keys, messages and the ring table."""

    def __init__(self, variant: str, names: Sequence[str], keys: Sequence[str], messages: int) -> None:
        self.variant = variant
        self.slots = range(len(names))
        self.keys = range(len(keys))
        self.msgs = range(messages)
        self.names, self.key_names = tuple(names), tuple(keys)
        self.table = ring_table(names, keys)

    def sorts(self) -> dict[str, Sort]:
        sorts: dict[str, Sort] = {"n": z3.Int, "rp": z3.Int}
        for m in self.msgs:
            sorts.update({f"key{m}": z3.Int, f"st{m}": z3.Int})
        for s in self.slots:
            sorts.update({f"conn{s}": z3.Bool, f"perm{s}": z3.Int, f"id{s}": z3.Int})
        if self.variant == "pip379":
            sorts["skip"] = z3.Bool
            for k in self.keys:
                sorts.update({f"town{k}": z3.Int, f"tref{k}": z3.Int})
        else:
            sorts["stuck"] = z3.Bool
            for s in self.slots:
                sorts[f"rj{s}"] = z3.Int
        return sorts

    # ------------------------------------------------------------------ derived terms

    def owner(self, conn: Sequence[z3.BoolRef], k: z3.ArithRef | int) -> z3.ArithRef:
        """The slot selected for key k with this connection vector."""
        out: z3.ArithRef = z3.IntVal(NONE)
        for mask, row in enumerate(self.table):
            here = z3.And(*[conn[s] if mask >> s & 1 else z3.Not(conn[s]) for s in self.slots])
            out = z3.If(here, _pick([z3.IntVal(v) for v in row], z3.IntVal(k) if isinstance(k, int) else k), out)
        return out

    def conn(self, f: Frame) -> list[z3.BoolRef]:
        return [f[f"conn{s}"] for s in self.slots]

    def perm(self, f: Frame, slot: z3.ArithRef) -> z3.ArithRef:
        return _pick([f[f"perm{s}"] for s in self.slots], slot)

    def md1(self, f: Frame) -> z3.ArithRef:
        """mark-delete + 1: the length of the acked prefix."""
        return _count([z3.And(*[f[f"st{j}"] == ACKED for j in range(m + 1)]) for m in self.msgs])

    def queued_key(self, f: Frame, k: z3.ArithRef) -> z3.BoolRef:
        return z3.Or(*[z3.And(f[f"st{m}"] == QUEUED, f[f"key{m}"] == k) for m in self.msgs])

    def town(self, f: Frame, k: z3.ArithRef) -> z3.ArithRef:
        return _pick([f[f"town{j}"] for j in self.keys], k)

    def pending_count(self, f: Frame, slot: int, k: int) -> z3.ArithRef:
        return _count([z3.And(f[f"st{m}"] == PENDING + slot, f[f"key{m}"] == k) for m in self.msgs])


def _unchanged(s: Frame, t: Frame, changed: Mapping[str, z3.ExprRef]) -> z3.BoolRef:
    return z3.And(*[t[name] == changed.get(name, s[name]) for name in s])


class _Trans:
    """The transition relation, one builder per action; each returns the updated variables."""

    def __init__(self, enc: _Encoding) -> None:
        self.e = enc
        self.pip379 = enc.variant == "pip379"

    # ------------------------------------------------------------------ shared pieces

    def draining(
        self, s: Frame, out: dict[str, z3.ExprRef], before: Sequence[z3.BoolRef], after: Sequence[z3.BoolRef],
        skip: int,
    ) -> None:
        """register_draining_hashes: losers holding a key start draining it, regainers stop (pip379)."""
        e = self.e
        for k in e.keys:
            was, now = e.owner(before, k), e.owner(after, k)
            town, tref = out.get(f"town{k}", s[f"town{k}"]), out.get(f"tref{k}", s[f"tref{k}"])
            for x in e.slots:
                if x == skip:
                    continue
                held = e.pending_count(s, x, k)
                lost = z3.And(was == x, now != x, held > 0)
                town, tref = z3.If(lost, x, town), z3.If(lost, z3.If(town == x, tref, 0) + held, tref)
            for x in e.slots:
                if x == skip:
                    continue
                held = e.pending_count(s, x, k)
                back = z3.And(now == x, was != x, held > 0, town == x)
                gone = z3.And(back, tref <= held)
                town, tref = z3.If(gone, NONE, town), z3.If(gone, 0, z3.If(back, tref - held, tref))
            out[f"town{k}"], out[f"tref{k}"] = town, tref

    def prune(self, s: Frame, out: dict[str, z3.ExprRef], md1: z3.ArithRef) -> None:
        """classic: drop recently joined consumers whose join position is <= mark-delete + 1."""
        for x in self.e.slots:
            rj = out.get(f"rj{x}", s[f"rj{x}"])
            out[f"rj{x}"] = z3.If(z3.And(rj != NONE, rj <= md1), NONE, rj)

    def free_id(self, s: Frame, slot: int) -> z3.ArithRef:
        """The lowest consumer id no other connected slot uses."""
        out: z3.ArithRef = z3.IntVal(len(self.e.names))
        for i in reversed(range(1, len(self.e.names) + 1)):
            used = z3.Or(*[z3.And(s[f"conn{x}"], s[f"id{x}"] == i) for x in self.e.slots if x != slot])
            out = z3.If(used, out, i)
        return out

    # ------------------------------------------------------------------ actions

    def add(self, s: Frame, slot: int, permits: int) -> tuple[z3.BoolRef, dict[str, z3.ExprRef]]:
        e = self.e
        before = e.conn(s)
        after = [z3.BoolVal(True) if x == slot else before[x] for x in e.slots]
        first = z3.Not(z3.Or(*before))
        md1 = e.md1(s)
        out: dict[str, z3.ExprRef] = {f"conn{slot}": z3.BoolVal(True), f"perm{slot}": z3.IntVal(permits),
                                      f"id{slot}": self.free_id(s, slot), "rp": z3.If(first, md1, s["rp"])}
        for m in e.msgs:
            out[f"st{m}"] = z3.If(z3.And(first, s[f"st{m}"] == QUEUED), FRESH, s[f"st{m}"])
        if self.pip379:
            self.draining(s, out, before, after, slot)
        else:
            record = z3.And(_count(after) >= 2, s["rp"] > md1)
            out[f"rj{slot}"] = z3.If(record, s["rp"], NONE)
        return z3.Not(before[slot]), out

    def remove(self, s: Frame, slot: int) -> tuple[z3.BoolRef, dict[str, z3.ExprRef]]:
        e = self.e
        before = e.conn(s)
        after = [z3.BoolVal(False) if x == slot else before[x] for x in e.slots]
        others = z3.Or(*after)
        out: dict[str, z3.ExprRef] = {f"conn{slot}": z3.BoolVal(False), f"perm{slot}": z3.IntVal(0),
                                      f"id{slot}": z3.IntVal(0)}
        for m in e.msgs:
            st = s[f"st{m}"]
            out[f"st{m}"] = z3.If(st == PENDING + slot, z3.If(others, QUEUED, FRESH),
                                  z3.If(z3.And(z3.Not(others), st == QUEUED), FRESH, st))
        if self.pip379:
            for k in e.keys:
                town, tref = s[f"town{k}"], s[f"tref{k}"]
                mine = town == slot  # closing: each pending ack of the leaver releases one reference
                gone = z3.Or(z3.Not(others), z3.And(mine, tref <= e.pending_count(s, slot, k)))
                out[f"town{k}"] = z3.If(gone, NONE, town)
                out[f"tref{k}"] = z3.If(gone, 0, z3.If(mine, tref - e.pending_count(s, slot, k), tref))
            self.draining(s, out, before, after, slot)
        else:
            remaining = _count(after)
            for x in e.slots:
                out[f"rj{x}"] = NONE if x == slot else z3.If(remaining == 1, NONE, s[f"rj{x}"])
            self.prune(s, out, e.md1(s))
        return before[slot], out

    def publish(self, s: Frame, k: z3.ArithRef) -> tuple[z3.BoolRef, dict[str, z3.ExprRef]]:
        e = self.e
        return z3.And(s["n"] < len(e.msgs), _pick([s[f"key{m}"] for m in e.msgs], s["n"]) == k), {"n": s["n"] + 1}

    def flow(self, s: Frame, slot: int) -> tuple[z3.BoolRef, dict[str, z3.ExprRef]]:
        perm = s[f"perm{slot}"]
        return z3.And(s[f"conn{slot}"], perm + 1 <= MAX_PERMITS), {f"perm{slot}": perm + 1}

    def ack(self, s: Frame, slot: int, m: int) -> tuple[z3.BoolRef, dict[str, z3.ExprRef]]:
        e = self.e
        out: dict[str, z3.ExprRef] = {f"st{m}": z3.IntVal(ACKED)}
        after = {**s, **out}
        md1 = e.md1(after)
        out["rp"] = z3.If(md1 > s["rp"], md1, s["rp"])
        if self.pip379:
            key = s[f"key{m}"]
            for k in e.keys:
                town, tref = s[f"town{k}"], s[f"tref{k}"]
                hit = z3.And(key == k, town == slot)
                out[f"town{k}"] = z3.If(z3.And(hit, tref <= 1), NONE, town)
                out[f"tref{k}"] = z3.If(hit, tref - 1, tref)
        else:
            self.prune(s, out, md1)
        return s[f"st{m}"] == PENDING + slot, out

    def read(self, s: Frame) -> dict[str, z3.ExprRef]:
        """read_more_entries with one entry per read; a no-op without consumers or permits."""
        e = self.e
        conn = e.conn(s)
        permits = z3.Sum(*[z3.If(conn[x], s[f"perm{x}"], 0) for x in e.slots])
        active = z3.And(z3.Or(*conn), permits >= 1)
        out = self.read_pip379(s) if self.pip379 else self.read_classic(s)
        return {name: z3.If(active, value, s[name]) for name, value in out.items()}

    def deliver(self, s: Frame, out: dict[str, z3.ExprRef], m: int, slot: z3.ArithRef, when: z3.BoolRef) -> None:
        out[f"st{m}"] = z3.If(when, PENDING + slot, out.get(f"st{m}", s[f"st{m}"]))
        for x in self.e.slots:
            perm = out.get(f"perm{x}", s[f"perm{x}"])
            out[f"perm{x}"] = z3.If(z3.And(when, slot == x), perm - 1, perm)

    def first_unread(self, s: Frame) -> tuple[list[z3.BoolRef], z3.BoolRef]:
        """One-hot: which entry a Normal read takes (the first unacked one at or after rp)."""
        e = self.e
        readable = [z3.And(s["rp"] <= m, m < s["n"], s[f"st{m}"] != ACKED) for m in e.msgs]
        first = [z3.And(readable[m], *[z3.Not(readable[j]) for j in range(m)]) for m in e.msgs]
        return first, z3.Or(*readable)

    def read_pip379(self, s: Frame) -> dict[str, z3.ExprRef]:
        e = self.e
        conn = e.conn(s)
        out: dict[str, z3.ExprRef] = {}
        # Replay filter: the first queued entry whose hash is not blocked, owner has a permit, not draining.
        examined = z3.Not(s["skip"])
        lazy = {k: z3.BoolVal(False) for k in e.keys}
        accepted: list[z3.BoolRef] = []
        for m in e.msgs:
            key = s[f"key{m}"]
            queued = s[f"st{m}"] == QUEUED
            dup = z3.Or(*[z3.And(s[f"st{j}"] == QUEUED, s[f"key{j}"] == key) for j in range(m)])
            c = e.owner(conn, key)
            town = e.town(s, key)
            ok = z3.And(queued, examined, z3.Not(dup), e.perm(s, c) > 0)
            for k in e.keys:
                lazy[k] = z3.Or(lazy[k], z3.And(ok, key == k, town == c))
            here = z3.And(ok, z3.Or(town == NONE, town == c))
            accepted.append(here)
            examined = z3.And(examined, z3.Not(here))
        replayed = z3.Or(*accepted)
        for m in e.msgs:
            self.deliver(s, out, m, e.owner(conn, s[f"key{m}"]), accepted[m])
        # Otherwise a Normal read of one entry.
        first, readable = self.first_unread(s)
        normal = z3.And(z3.Not(replayed), readable)
        skip: z3.BoolRef = z3.BoolVal(False)
        for m in e.msgs:
            key = s[f"key{m}"]
            c = e.owner(conn, key)
            town = e.town(s, key)
            takes = z3.And(normal, first[m])
            has_permit = e.perm(s, c) > 0
            by_hash = z3.And(has_permit, z3.Or(e.queued_key(s, key), z3.And(town != NONE, town != c)))
            for k in e.keys:
                lazy[k] = z3.Or(lazy[k], z3.And(takes, has_permit, z3.Not(e.queued_key(s, key)), key == k, town == c))
            sent = z3.And(takes, has_permit, z3.Not(by_hash))
            self.deliver(s, out, m, c, sent)
            out[f"st{m}"] = z3.If(z3.And(takes, z3.Not(sent)), QUEUED, out[f"st{m}"])
            others = z3.Or(*[z3.And(conn[x], s[f"perm{x}"] > 0, c != x) for x in e.slots])
            skip = z3.Or(skip, z3.And(takes, z3.Not(sent), z3.Or(by_hash, others)))
            out["rp"] = z3.If(takes, m + 1, out.get("rp", s["rp"]))
        out["skip"] = skip
        for k in e.keys:
            out[f"town{k}"] = z3.If(lazy[k], NONE, s[f"town{k}"])
            out[f"tref{k}"] = z3.If(lazy[k], 0, s[f"tref{k}"])
        return out

    def read_classic(self, s: Frame) -> dict[str, z3.ExprRef]:
        e = self.e
        conn = e.conn(s)
        md1 = e.md1(s)
        out: dict[str, z3.ExprRef] = {}
        pruned = {x: z3.If(z3.And(s[f"rj{x}"] != NONE, s[f"rj{x}"] <= md1), NONE, s[f"rj{x}"]) for x in e.slots}
        head = z3.IntVal(len(e.msgs) + 1)
        for x in e.slots:
            head = z3.If(z3.And(pruned[x] != NONE, pruned[x] < head), pruned[x], head)
        # Replay: only the first queued entry is a candidate; its owner needs a permit and, if recently
        # joined, the entry must lie below the smallest join position.
        queued = [s[f"st{m}"] == QUEUED for m in e.msgs]
        first_queued = [z3.And(queued[m], *[z3.Not(queued[j]) for j in range(m)]) for m in e.msgs]
        looked = z3.BoolVal(False)
        accepted: list[z3.BoolRef] = []
        for m in e.msgs:
            c = e.owner(conn, s[f"key{m}"])
            candidate = z3.And(z3.Not(s["stuck"]), first_queued[m], e.perm(s, c) > 0)
            looked = z3.Or(looked, candidate)
            accepted.append(z3.And(candidate, z3.Or(_pick([pruned[x] for x in e.slots], c) == NONE, m < head)))
            self.deliver(s, out, m, c, accepted[m])
        replayed = z3.Or(*accepted)
        rj = {x: z3.If(looked, pruned[x], s[f"rj{x}"]) for x in e.slots}
        # Normal read: needs a consumer with a permit that is not recently joined.
        first, readable = self.first_unread(s)
        can_read = z3.Or(*[z3.And(conn[x], s[f"perm{x}"] > 0, rj[x] == NONE) for x in e.slots])
        normal = z3.And(z3.Not(replayed), can_read, readable)
        sent_any = replayed
        for m in e.msgs:
            key = s[f"key{m}"]
            c = e.owner(conn, key)
            takes = z3.And(normal, first[m])
            gated = z3.And(takes, e.perm(s, c) > 0, z3.Not(e.queued_key(s, key)))
            limit = _pick([pruned[x] for x in e.slots], c)
            sent = z3.And(gated, z3.Or(limit == NONE, m < limit))
            self.deliver(s, out, m, c, sent)
            out[f"st{m}"] = z3.If(z3.And(takes, z3.Not(sent)), QUEUED, out[f"st{m}"])
            out["rp"] = z3.If(takes, m + 1, out.get("rp", s["rp"]))
            for x in e.slots:
                rj[x] = z3.If(gated, pruned[x], rj[x])
            sent_any = z3.Or(sent_any, sent)
        dispatched = z3.Or(replayed, normal)
        empty = z3.And(*[rj[x] == NONE for x in e.slots])
        out["stuck"] = z3.If(dispatched, z3.And(z3.Not(sent_any), empty), z3.BoolVal(False))
        out.update({f"rj{x}": rj[x] for x in e.slots})
        return out


def keyshared_system(
    variant: str = "pip379", names: Sequence[str] = NAMES, keys: Sequence[str] = KEYS, messages: int = MESSAGES
) -> SymbolicSystem:
    """The dispatcher of `variant` ("pip379" or "classic") as a `SymbolicSystem`."""
    if variant not in ("pip379", "classic"):
        raise ValueError(f"no Z3 encoding for variant {variant!r}")
    enc = _Encoding(variant, names, keys, messages)
    trans_of = _Trans(enc)

    def trans(s: Frame, a: Frame, t: Frame) -> z3.BoolRef:
        options: list[z3.BoolRef] = []

        def option(index: int, guard: z3.BoolRef, changed: Mapping[str, z3.ExprRef], *params: z3.BoolRef) -> None:
            options.append(z3.And(a["action"] == index, guard, *params, _unchanged(s, t, changed)))

        for slot in enc.slots:
            at = a["slot"] == slot
            for permits in ADD_PERMITS:
                guard, out = trans_of.add(s, slot, permits)
                option(0, guard, out, at, a["permits"] == permits, a["id"] == out[f"id{slot}"])
            guard, out = trans_of.remove(s, slot)
            option(1, guard, out, at, a["id"] == s[f"id{slot}"])
            guard, out = trans_of.flow(s, slot)
            option(3, guard, out, at, a["id"] == s[f"id{slot}"])
            for m in enc.msgs:
                guard, out = trans_of.ack(s, slot, m)
                option(4, guard, out, at, a["pos"] == m, a["id"] == s[f"id{slot}"])
        guard, out = trans_of.publish(s, a["key"])
        option(2, guard, out, a["key"] >= 0, a["key"] < len(enc.keys))
        option(5, z3.BoolVal(True), trans_of.read(s))
        return z3.Or(*options)

    def init(f: Frame) -> z3.BoolRef:
        parts = [f["n"] == 0, f["rp"] == 0]
        parts += [z3.And(f[f"key{m}"] >= 0, f[f"key{m}"] < len(enc.keys), f[f"st{m}"] == FRESH) for m in enc.msgs]
        parts += [z3.And(z3.Not(f[f"conn{s}"]), f[f"perm{s}"] == 0, f[f"id{s}"] == 0) for s in enc.slots]
        if variant == "pip379":
            parts += [z3.Not(f["skip"])] + [z3.And(f[f"town{k}"] == NONE, f[f"tref{k}"] == 0) for k in enc.keys]
        else:
            parts += [z3.Not(f["stuck"])] + [f[f"rj{s}"] == NONE for s in enc.slots]
        return z3.And(*parts)

    def ks_i1(f: Frame) -> z3.BoolRef:
        return z3.And(*[
            z3.Not(z3.And(f[f"st{i}"] == PENDING + x, f[f"st{j}"] == PENDING + y, f[f"key{i}"] == f[f"key{j}"]))
            for i, j in itertools.product(enc.msgs, repeat=2) for x in enc.slots for y in enc.slots if x != y
        ])

    def ks_i2(f: Frame) -> z3.BoolRef:
        conn = enc.conn(f)
        parts = []
        for k in enc.keys:
            town = f[f"town{k}"]
            parts.append(z3.Or(z3.And(town == NONE, f[f"tref{k}"] == 0), *[
                z3.And(town == x, conn[x], f[f"tref{k}"] >= 1, f[f"tref{k}"] == enc.pending_count(f, x, k),
                       enc.owner(conn, k) != x)
                for x in enc.slots
            ]))
        return z3.And(*parts)

    def well_formed(f: Frame) -> z3.BoolRef:
        conn = enc.conn(f)
        parts = [f["n"] >= 0, f["n"] <= len(enc.msgs), f["rp"] >= 0, f["rp"] <= f["n"]]
        for m in enc.msgs:
            st = f[f"st{m}"]
            parts.append(z3.And(f[f"key{m}"] >= 0, f[f"key{m}"] < len(enc.keys), st >= FRESH,
                                st < PENDING + len(enc.slots), z3.Implies(m >= f["n"], st == FRESH),
                                z3.Implies(z3.Or(st == QUEUED, st >= PENDING), m < f["rp"])))
            for x in enc.slots:
                holder = st == PENDING + x
                parts.append(z3.Implies(holder, conn[x]))
                if variant == "pip379":
                    key = f[f"key{m}"]
                    parts.append(z3.Implies(holder, z3.Or(enc.owner(conn, key) == x, enc.town(f, key) == x)))
        parts += [z3.And(f[f"perm{x}"] >= 0, f[f"perm{x}"] <= MAX_PERMITS) for x in enc.slots]
        return z3.And(*parts)

    invariants: dict[str, Callable[[Frame], z3.BoolRef]] = {"KS-I1": ks_i1}
    if variant == "pip379":
        invariants.update({"KS-I2": ks_i2, "KS-W": well_formed})

    def decode(values: Mapping[str, int | bool]) -> Action:
        name = ACTIONS[int(values["action"])]
        cid = int(values["id"])
        if name == "add":
            slot = int(values["slot"])
            return Action("add", (("consumer", cid), ("name", names[slot]), ("permits", int(values["permits"]))))
        if name in ("remove", "flow"):
            return Action.of(name, consumer=cid, **({"n": 1} if name == "flow" else {}))
        if name == "ack":
            return Action.of("ack", consumer=cid, position=int(values["pos"]))
        if name == "publish":
            return Action.of("publish", key=keys[int(values["key"])])
        return Action.of("read")

    return SymbolicSystem(
        name=f"keyshared-{variant}",
        state=enc.sorts(),
        choice={"slot": z3.Int, "permits": z3.Int, "id": z3.Int, "pos": z3.Int, "key": z3.Int},
        action_names=ACTIONS,
        init=init,
        trans=trans,
        invariants=invariants,
        decode=decode,
    )


def frame_of(model: KeySharedModel, state: KSState, keys: Sequence[int]) -> dict[str, int | bool]:
    """The concrete frame of a model state; `keys` fixes the (not yet published) key of every message."""
    slot_of = {name: slot for slot, name in enumerate(model.names)}
    by_slot = {slot_of[c.name]: c for c in state.consumers}
    status = {p: QUEUED for p, _ in state.replay}
    acked = set(state.acked)
    status.update({p: ACKED for p in range(len(state.messages)) if p <= state.mark_delete or p in acked})
    for slot, c in by_slot.items():
        status.update({p: PENDING + slot for p in c.pending})
    frame: dict[str, int | bool] = {"n": len(state.messages), "rp": state.read_position}
    for m, key in enumerate(keys):
        frame[f"key{m}"] = state.messages[m] if m < len(state.messages) else key
        frame[f"st{m}"] = status.get(m, FRESH)
    for slot in range(len(model.names)):
        here = by_slot.get(slot)
        frame[f"conn{slot}"] = here is not None
        frame[f"perm{slot}"], frame[f"id{slot}"] = (here.permits, here.id) if here else (0, 0)
    if model.variant == "pip379":
        frame["skip"] = state.skip_next_replay
        draining = {d.hash: d for d in state.draining}
        for k, h in enumerate(model.key_hashes):
            d = draining.get(h)
            frame[f"town{k}"] = slot_of[next(c.name for c in state.consumers if c.id == d.owner)] if d else NONE
            frame[f"tref{k}"] = d.ref_count if d else 0
    else:
        frame["stuck"] = state.stuck_on_replays
        joined = dict(state.recently_joined)
        for slot in range(len(model.names)):
            here = by_slot.get(slot)
            frame[f"rj{slot}"] = joined.get(here.id, NONE) if here else NONE
    return frame


def proofs(depth: int) -> list[tuple[ProofResult, bool]]:
    """KS-I1 (with KS-I2 and KS-W) must hold on pip379; the classic twin must break KS-I1."""
    fixed = prove(keyshared_system("pip379"), depth)
    twin = bmc(keyshared_system("classic"), depth, ["KS-I1"])  # KS-I1 alone is not inductive: skip the attempt
    return [(r, True) for r in fixed] + [(r, False) for r in twin]


def bench(_folder: Path) -> dict[str, object]:
    """The proof figures for `brokerspec bench`: induction, plain BMC of KS-I1 to depth 10, the twin."""
    out: dict[str, object] = {"z3_config": f"{len(NAMES)} consumers, {len(KEYS)} keys, {MESSAGES} messages"}
    for result, must_hold in proofs(10):
        role = "pip379" if must_hold else "classic_twin"
        out[f"z3_{role}_{result.invariant}"] = result.summary()
        out[f"z3_{role}_{result.invariant}_s"] = round(result.elapsed_s, 2)
    (bounded,) = bmc(keyshared_system("pip379"), 10, ["KS-I1"])
    out["z3_bmc_depth10_KS-I1_pip379"] = bounded.summary()
    out["z3_bmc_depth10_KS-I1_pip379_s"] = round(bounded.elapsed_s, 2)
    return out

