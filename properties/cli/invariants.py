"""`brokerspec invariants`: every named property of each mechanism, generated from its binding.

One source of truth: a property's statement is its model's own text (`Invariant.description`, or
`Liveness.description`), else the binding's `Mechanism.beyond_model`. Which engines judge it, and on which
configurations, is read from the models of the binding's configurations, its `reference_judges` and
`model_only` scopes, its `beyond_model` entries and its Z3 proofs; what must break it, from its twins,
known findings, Z3 twins and the planted bugs' `Kills:` headers (`tests/mutants/*.patch`).
`docs/spec/<mechanism>.md` explains each one in prose, and `tests/test_spec_docs.py` keeps the two in step.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from properties.cli.common import PASS, UsageError, mechanisms
from properties.cli.mutants import Mutant, MutantError, discover
from properties.engines.mechanism import JUDGED_BY, Mechanism

PROOF_DEPTH = 1
"""The catalogue needs the proofs' names, not their verdicts: every proof lists its invariants at any depth."""

LIVENESS, INVARIANT, BEYOND = "liveness", "invariant", "beyond the model"

ENGINES: dict[str, str] = {
    "explorer": "every reachable state of the model in these explorer configurations (liveness: AG EF on the graph)",
    "hypothesis (model)": "the model's side of the Hypothesis lockstep runs in these configurations",
    "z3": "proved (bounded, k-inductive or valid) by these Z3 systems",
    "conformance (reference)": "the binding's oracles on the reference, replaying every transition of these "
                               "explorer configurations",
    "hypothesis (reference)": "the binding's oracles on the reference in these Hypothesis configurations",
    "conformance (lockstep)": "the reference's variables and observations equal the model's, which implements the "
                              "property, at every replayed step of these explorer configurations",
    "hypothesis (lockstep)": "the same in these Hypothesis configurations",
    "tests": JUDGED_BY["tests"],
    "bench": JUDGED_BY["bench"],
}
"""What each engine key of the catalogue means, in the order the catalogue lists them."""


@dataclass(frozen=True)
class Entry:
    """One named property of one mechanism, as the code declares and checks it."""

    mechanism: str
    name: str
    kind: str
    """`invariant` or `liveness` (a model states it), else `beyond the model` (`Mechanism.beyond_model`)."""
    statements: tuple[tuple[str, str], ...]
    """(scope, statement), one per distinct text: scopes may word the same property for their own state."""
    judged: tuple[tuple[str, tuple[str, ...]], ...]
    """(engine, the configurations it judges the property on, or the Z3 systems, or where the tests live)."""
    broken_by: tuple[str, ...]
    """The twins, known findings, Z3 twins and planted bugs that must break it."""

    def as_json(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism, "id": self.name, "kind": self.kind,
            "statements": [{"scope": scope, "statement": text} for scope, text in self.statements],
            "judged_by": {engine: list(where) for engine, where in self.judged},
            "broken_by": list(self.broken_by),
        }


def _natural(name: str) -> list[object]:
    """TL-I2 before TL-I10: digits compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def catalogue(mechanism: Mechanism, mutants: Sequence[Mutant] = ()) -> list[Entry]:
    """Every property `mechanism` names, in natural order of their IDs, with where each is judged and broken.

    `mutants` are the planted bugs to read `Kills:` from (those of other mechanisms are ignored). The Z3 proofs
    run at `PROOF_DEPTH` to learn their systems (a few seconds for delayed's validity queries).
    """
    kinds: dict[str, str] = {}
    statements: dict[str, dict[str, str]] = {}
    judged: dict[str, dict[str, list[str]]] = {}
    broken: dict[str, list[str]] = {}

    def judge(name: str, engine: str, where: str) -> None:
        places = judged.setdefault(name, {}).setdefault(engine, [])
        if where not in places:
            places.append(where)

    for engine, configs in (("explorer", mechanism.explore_configs), ("hypothesis", mechanism.hypothesis_configs)):
        for config_name, config in configs.items():
            scope = mechanism.scope(config)
            model = mechanism.make_model(config, mechanism.current)
            for props, kind in ((model.invariants, INVARIANT), (model.liveness, LIVENESS)):
                for prop in props:
                    kinds.setdefault(prop.name, kind)
                    texts = statements.setdefault(prop.name, {})
                    if prop.description not in texts.values():
                        texts[scope] = prop.description
                    if kind == INVARIANT or engine == "explorer":  # liveness is judged on the explorer's graph
                        judge(prop.name, f"{engine} (model)" if engine == "hypothesis" else engine, config_name)
            if scope in mechanism.model_only or mechanism.make_reference is None:
                continue
            side = "conformance" if engine == "explorer" else "hypothesis"
            for name in mechanism.reference_judges.get(scope, ()):
                judge(name, f"{side} (reference)", config_name)
            for name, extra in mechanism.beyond_model.items():
                if "lockstep" in extra.judged_by:
                    judge(name, f"{side} (lockstep)", config_name)
    for name, extra in mechanism.beyond_model.items():
        kinds.setdefault(name, BEYOND)
        statements.setdefault(name, {mechanism.name: extra.statement})
        for how in extra.judged_by:
            if how == "tests":
                judge(name, "tests", f"tests/{mechanism.name}/")
            elif how == "bench":
                judge(name, "bench", "brokerspec bench")
    for variant, target in mechanism.twins.items():
        broken.setdefault(target, []).append(f"twin {variant}")
    findings: dict[tuple[str, str], list[str]] = {}
    for config_name, found in mechanism.findings.items():
        for name, document in found.items():
            findings.setdefault((name, document), []).append(config_name)
    for (name, document), config_names in findings.items():
        broken.setdefault(name, []).append(f"known finding on {', '.join(config_names)} ({document})")
    for proof, must_hold in mechanism.proofs(PROOF_DEPTH) if mechanism.proofs is not None else ():
        if must_hold:
            judge(proof.invariant, "z3", proof.system)
        else:
            broken.setdefault(proof.invariant, []).append(f"z3 twin {proof.system}")
    for mutant in mutants:
        if mutant.mechanism == mechanism.name:
            broken.setdefault(mutant.kills, []).append(f"mutant {mutant.name}")
    names = sorted({*kinds, *judged, *broken}, key=_natural)
    return [
        Entry(mechanism.name, name, kinds.get(name, BEYOND),
              tuple(statements.get(name, {}).items()) or ((mechanism.name, mechanism.statement(name)),),
              tuple((engine, tuple(judged[name][engine])) for engine in ENGINES if engine in judged.get(name, {})),
              tuple(broken.get(name, ())))
        for name in names
    ]


def render(mechanism: Mechanism, entries: Sequence[Entry]) -> str:
    """The catalogue of one mechanism as text: a paragraph per property."""
    lines = [f"{mechanism.name}: {len(entries)} properties (prose: {mechanism.spec})"]
    for entry in entries:
        lines.append("")
        if len(entry.statements) == 1:
            lines.append(f"{entry.name}  [{entry.kind}]  {entry.statements[0][1]}")
        else:
            lines.append(f"{entry.name}  [{entry.kind}]")
            lines.extend(f"  {scope}: {text}" for scope, text in entry.statements)
        label = "judged by"
        for engine, where in entry.judged or (("nothing", ()),):
            lines.append(f"  {label:<10} {engine}: {', '.join(where)}" if where else f"  {label:<10} {engine}")
            label = ""
        if entry.broken_by:
            lines.append(f"  {'broken by':<10} {'; '.join(entry.broken_by)}")
    return "\n".join(lines)


def cmd_invariants(args: argparse.Namespace) -> int:
    """Print the catalogue of the chosen mechanisms (all by default), as text or as one JSON document."""
    chosen = mechanisms(args.mechanism)
    try:
        mutants = discover()
    except MutantError as exc:
        raise UsageError(str(exc)) from None
    report = [(mechanism, catalogue(mechanism, mutants)) for mechanism in chosen]
    if args.json:
        print(json.dumps({"engines": ENGINES, "invariants": [
            entry.as_json() for _, entries in report for entry in entries]}, indent=1, ensure_ascii=False))
        return PASS
    legend = "\n".join(f"  {engine}: {meaning}" for engine, meaning in ENGINES.items())
    print("\n\n".join([*(render(mechanism, entries) for mechanism, entries in report), f"engines:\n{legend}"]))
    return PASS
