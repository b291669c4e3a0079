"""Z3 encoding of one principal's layered cache (§4.5) for proofs of PQ-I1/PQ-I2 and their `no_readd` twin.

The cache is abstracted to what decides whether one tracked PID x is remembered: whether the entry
exists (`alive`), the creation time of its target layer (`tgt`) and its rotation timer (`rot`), whether
x is in some layer (`xin`) and the creation time of the newest layer holding it (`xc`). Layers are
created in time order and only expire from the head, so x is forgotten exactly when a cleanup or a
rotation runs at a time n with `xc + W < n`, and the entry goes when its target has expired.

Everything else is over-approximated, so the proofs cover more behaviours than the cache has:
* W and ΔT are symbolic (any ΔT >= 1 and W >= 2·ΔT, i.e. every L >= 2 at once);
* the count check is a free choice `fire` on each merge (it covers every n_layer and every history
  of other PIDs), and the timer rotates whenever the count check did not fire and `n >= rot`;
* other PIDs only matter through their merges (`track_other`), at any time;
* cleanups run at any time (`cleanup`), not only on the manager's schedule.
Membership is exact: a false positive can only make x look seen for longer (the newest layer that
"holds" it would be newer), so the proofs assume the perfect hasher the model uses.

Each action first advances the clock by a free `dt >= 0`. The history invariants are sticky flags:
PQ-I1 (`bad1`) is set when x is counted new within H = W - ΔT of its last sighting, PQ-I2 (`bad2`)
within ΔT. They are not inductive alone; `PQ-W` is the strengthening that closes a 1-induction:
after a sighting at s, x sits in a layer created at or after s - ΔT (the re-add rule's whole point),
so it cannot expire before s + H.
"""

from __future__ import annotations

from collections.abc import Mapping

import z3

from models.core import Action
from properties.engines.bmc import Frame, ProofResult, Sort, SymbolicSystem, prove

ACTIONS = ("track_x", "track_other", "cleanup")
TWINS = {"no_readd": ("PQ-I1", "PQ-I2")}

_STATE: dict[str, Sort] = {
    "now": z3.Int, "W": z3.Int, "D": z3.Int, "alive": z3.Bool, "tgt": z3.Int, "rot": z3.Int,
    "xin": z3.Bool, "xc": z3.Int, "seen": z3.Bool, "last": z3.Int, "bad1": z3.Bool, "bad2": z3.Bool,
}


def cache_system(variant: str = "current") -> SymbolicSystem:
    """The abstract cache of `variant` (`current` re-adds x when its newest layer is older than ΔT)."""
    readd = variant == "current"

    def trans(s: Frame, a: Frame, t: Frame) -> z3.BoolRef:
        n, w, d, fire = s["now"] + a["dt"], s["W"], s["D"], a["fire"]
        # A merge at n: create the entry, or rotate (count check, else the timer), cleaning on rotation.
        timer = z3.And(z3.Not(fire), n >= s["rot"])
        rotate = z3.Or(fire, timer)
        m_tgt = z3.If(s["alive"], z3.If(rotate, n, s["tgt"]), n)
        m_rot = z3.If(s["alive"], z3.If(timer, n + d, s["rot"]), n + d)
        m_xin = z3.And(s["xin"], z3.Not(z3.And(rotate, s["xc"] + w < n)))

        def keep(**changed: z3.ExprRef) -> z3.BoolRef:
            return z3.And(*[t[k] == changed.get(k, s[k]) for k in _STATE if k != "now"], t["now"] == n)

        contained = z3.And(s["alive"], s["xin"])
        new = z3.Not(contained)
        merge_x = z3.Or(new, s["xc"] < n - d) if readd else new
        recent1 = z3.And(new, s["seen"], n <= s["last"] + w - d)
        recent2 = z3.And(new, s["seen"], n <= s["last"] + d)
        gone = z3.And(s["alive"], s["tgt"] + w < n)
        return z3.And(
            a["dt"] >= 0,
            z3.Or(
                z3.And(a["action"] == 0, keep(
                    alive=z3.BoolVal(True),
                    tgt=z3.If(merge_x, m_tgt, s["tgt"]), rot=z3.If(merge_x, m_rot, s["rot"]),
                    xin=z3.BoolVal(True), xc=z3.If(merge_x, m_tgt, s["xc"]),
                    seen=z3.BoolVal(True), last=n,
                    bad1=z3.Or(s["bad1"], recent1), bad2=z3.Or(s["bad2"], recent2),
                )),
                z3.And(a["action"] == 1, keep(alive=z3.BoolVal(True), tgt=m_tgt, rot=m_rot, xin=m_xin)),
                z3.And(a["action"] == 2, keep(
                    alive=z3.And(s["alive"], z3.Not(gone)),
                    xin=z3.And(s["xin"], z3.Not(gone), z3.Not(s["xc"] + w < n)),
                )),
            ),
        )

    def init(s: Frame) -> z3.BoolRef:
        return z3.And(
            s["now"] == 0, s["D"] >= 1, s["W"] >= 2 * s["D"], z3.Not(s["alive"]), z3.Not(s["xin"]),
            z3.Not(s["seen"]), z3.Not(s["bad1"]), z3.Not(s["bad2"]),
            s["tgt"] == 0, s["rot"] == 0, s["xc"] == 0, s["last"] == 0,
        )

    invariants = {
        "PQ-I1": lambda s: z3.Not(s["bad1"]),
        "PQ-I2": lambda s: z3.Not(s["bad2"]),
        "PQ-W": lambda s: z3.And(
            s["D"] >= 1, s["W"] >= 2 * s["D"],
            z3.Implies(s["alive"], z3.And(s["tgt"] <= s["now"], s["rot"] <= s["tgt"] + s["D"])),
            z3.Implies(s["xin"], z3.And(s["alive"], s["xc"] <= s["tgt"])),
            z3.Implies(s["seen"], s["last"] <= s["now"]),
            z3.Implies(z3.And(s["seen"], s["xin"]), s["xc"] >= s["last"] - s["D"]),
            z3.Implies(z3.And(s["seen"], s["now"] <= s["last"] + s["W"] - s["D"]), s["xin"]),
        ),
    }

    def decode(values: Mapping[str, int | bool]) -> Action:
        name = ACTIONS[int(values["action"])]
        if name == "cleanup":
            return Action.of(name, dt=int(values["dt"]))
        return Action.of(name, dt=int(values["dt"]), fire=bool(values["fire"]))

    return SymbolicSystem(
        name=f"PidCache[{variant}]",
        state=_STATE,
        choice={"dt": z3.Int, "fire": z3.Bool},
        action_names=ACTIONS,
        init=init,
        trans=trans,
        invariants=invariants,
        decode=decode,
    )


def proofs(depth: int) -> list[tuple[ProofResult, bool]]:
    """PQ-I1, PQ-I2 (with PQ-W) proved for `current`; `no_readd` must break each of them within `depth`."""
    results = [(r, True) for r in prove(cache_system("current"), depth)]
    for variant, names in TWINS.items():
        for name in names:
            [result] = prove(cache_system(variant), depth, invariants=[name])
            results.append((result, False))
    return results
