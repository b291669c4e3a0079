"""The binding interface: everything the engines need to check one mechanism.

Engines take a `Mechanism` and never look one up by name; the names live one floor up, in
`properties.registry`, so that no engine depends on any particular mechanism. What a mechanism
declares for the engines (its interesting states, its port vocabulary) is typed here too, so that
its folder's modules and the engines that read them share one low module and no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from models.core import Json, Model, Param
from properties.engines.bmc import ProofResult
from properties.engines.eventlog import EventLog
from properties.engines.lockstep import ImplementationFactory
from traces.limits import Bounds

Vars = Mapping[str, Json]
Predicate = Callable[[Mapping[str, Param], Vars], bool]


@dataclass(frozen=True)
class Interesting:
    """A named situation a check must reach for its invariants to mean something.

    `holds(config, vars)` reads the model's projected variables (the same projection traces and ports
    use), so a mechanism's situations read alike for every engine.
    """

    name: str
    holds: Predicate


@dataclass(frozen=True)
class ActionDoc:
    """What an action does, when the harness offers it, and what each parameter means."""

    meaning: str
    enabled: str
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Vocabulary:
    """The declared meanings of one scope; `defaults` are values the model reads but leaves out of its config."""

    config: Mapping[str, str]
    vars: Mapping[str, str]
    actions: Mapping[str, ActionDoc]
    observation: Mapping[str, str]
    defaults: Mapping[str, Param] = field(default_factory=dict)


JUDGED_BY: Mapping[str, str] = {
    "reference": "the binding's oracles, on the reference (conformance and Hypothesis)",
    "lockstep": "lockstep: the model implements it, and the reference's variables and observations must equal the "
                "model's at every step (conformance and Hypothesis)",
    "z3": "a lemma of the Z3 proofs: the strengthening their induction closes over",
    "tests": "unit tests of the reference (tests/<mechanism>/)",
    "bench": "measured by brokerspec bench on the reference",
}
"""How a property no model states may be judged: the keys `Property.judged_by` names."""

HARNESS_INPUT = "harness input"
"""The guard of a compared variable whose value the adapter takes from the harness's own inputs (its clock, its
settle step), not from the reference: no reference bug can make it differ, so no oracle is needed."""


@dataclass(frozen=True)
class Guard:
    """What catches a wrong value of one compared variable by name: the properties judged on the reference
    (`reference_judges` of its scope) that such a value breaks, or `HARNESS_INPUT`; or, where there is none
    yet, `unguarded` says why (check then reports a divergence there as a defect of the harness)."""

    by: tuple[str, ...] = ()
    unguarded: str = ""


@dataclass(frozen=True)
class Property:
    """A named property no model states: its one-sentence statement, and how it is judged (`JUDGED_BY` keys).

    A model's `Invariant` carries its own statement (`description`); these are the others a mechanism names:
    oracles only the reference can be judged by (a filter's bits, a sensor), Z3 lemmas, measured costs.
    """

    statement: str
    judged_by: tuple[str, ...]


@dataclass(frozen=True)
class Lanes:
    """Hints for `brokerspec report`, which draws a trace with one lane per actor derived from the variables."""

    tuple_id: Mapping[str, int] = field(default_factory=dict)
    """List variables whose tuple elements are identified by their first n items (e.g. a bucket by its start)
    rather than by position."""
    actor_of: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """List variables whose tuple elements belong to an actor named by one of their items, as (actor, item index):
    one lane gathers all of an actor's elements instead of one lane per variable."""


@dataclass(frozen=True)
class BundledPort:
    """A port of the mechanism that ships with the project, whose tour `brokerspec bench` times."""

    name: str
    """Names the bench's figures (`port_tour_<name>_s`, ...)."""
    program: str
    """The interpreter it runs on, looked up on PATH (the bench says it did not run without it)."""
    script: str
    """The port's source, relative to the project's root."""
    config: str
    """The explore configuration it tours."""


@dataclass(frozen=True)
class Mechanism:
    """Everything the engines need to check one mechanism.

    `twins` maps each known-bad variant to the invariant the harness must report on it: a check
    that passes on `current` is only trusted because it fails on these. Every configuration must
    pass on `current`; a twin must be caught by at least one configuration of each engine (its bug
    may be out of reach of some, e.g. a flow bug in a semaphore-only configuration). `proofs(depth)` returns
    Z3 verdicts, each with whether it must hold (False for a mutant twin that must fail).
    `bench` adds the mechanism's own measurements (e.g. a memory experiment) to `brokerspec bench`; it
    gets the bench's output folder, for the plots it draws.
    """

    name: str
    spec: str
    make_model: Callable[[Mapping[str, Param] | None, str], Model[Any]]
    make_reference: ImplementationFactory | None
    current: str
    twins: Mapping[str, str]
    explore_configs: Mapping[str, Mapping[str, Param]]
    hypothesis_configs: Mapping[str, Mapping[str, Param]]
    proofs: Callable[[int], list[tuple[ProofResult, bool]]] | None = None
    bench: Callable[[Path], dict[str, object]] | None = None
    conformance_steps: Mapping[str, int] = field(default_factory=dict)
    """Replayed steps the conformance engine spends on an explore configuration, where it is not the
    default: a large configuration whose every transition would take minutes gets its shallowest ones."""
    interesting: tuple[Interesting, ...] = ()
    """The situations its invariants exist for, which coverage reports reached or not (empty: action
    coverage only), so that a change that silently stops reaching one fails the tests."""
    not_offered: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """By variant, actions it never enables by design, with the reason: exempt from action coverage."""
    vocabularies: Mapping[str, Vocabulary] = field(default_factory=dict)
    """The port vocabulary (declared meanings) of each scope, by scope name: `brokerspec protocol`'s source."""
    scope_of: Callable[[Mapping[str, Param]], str] | None = None
    """The scope a model configuration speaks, where the mechanism has several; see `scope`."""
    findings: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Known findings, by explore configuration: the invariants the current variant breaks there, each with
    the document that writes it up (a bug the models found upstream, or a configuration that models the
    code a fix replaced: a twin at that configuration's scope). The explorer, which explores every state
    whatever it finds, must still find every one of them (a model change that stops finding one fails the
    check, as a missed twin does) and judges the current variant there on the other invariants."""
    model_only: Mapping[str, str] = field(default_factory=dict)
    """Scopes the reference implementation does not reach, with the reason (e.g. a model finer-grained than
    the reference's steps): no conformance there, and Hypothesis runs and traces use the model alone."""
    reference_judges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """By scope, the invariants the reference adapter's `violations` reports there (judged on the reference from
    the harness's own record, in conformance and Hypothesis): what `brokerspec invariants` says the reference is
    checked on. A planted bug of the reference can only be killed by one of these."""
    beyond_model: Mapping[str, Property] = field(default_factory=dict)
    """The named properties no model of the mechanism states, with their statements: with the models' invariants,
    the mechanism's whole catalogue (`brokerspec invariants`, and `docs/spec/<mechanism>.md`)."""
    nightly_configs: Mapping[str, Mapping[str, Param]] = field(default_factory=dict)
    """Explore configurations too large for the default gate: not in the default check; `explore --config` reaches
    them by name as it reaches `explore_configs`."""
    quick_configs: tuple[str, ...] = ()
    """The explore configurations `check --profile quick` replays on the reference (default: the first): the
    smallest that still reach each of the mechanism's scopes, for a check under half a minute."""
    guards: Mapping[str, Mapping[str, Guard]] = field(default_factory=dict)
    """By scope the reference replays, every variable conformance compares (the keys of the model's `vars`) with
    its `Guard`: a divergence is a bug, and the guard is what names it, so that no bug ends as a bare divergence."""
    log: Callable[[], EventLog] | None = None
    """Its event log for the Spark pipeline (`simulate`, `pipeline check`, `bench --pipeline`), loaded when first
    asked for (it imports Spark and Arrow); None: the pipeline does not cover the mechanism."""
    limits: Bounds = field(default_factory=dict)
    """Every configuration key that holds an integer, with the least and the largest value a trace may carry (for a
    list, each of its integers; `len(KEY)` bounds its items): for a key that sizes the work of a replay (a loop or
    an allocation), far above any configuration the checks use and low enough that replaying a trace stays within
    seconds; for the others, the range of the upstream field's Java type. Checked before anything is built from a
    trace's configuration (`traces.limits.config_problem`); `tests/engines/test_limits.py` finds a key without one."""
    lanes: Lanes = field(default_factory=Lanes)
    """How `brokerspec report` gathers its variables into actor lanes, beyond the generic rule."""
    bundled_port: BundledPort | None = None
    """A port in another language that ships with the project (under `tests/ports/`), toured by the bench."""

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.current, *self.twins)

    @property
    def every_explore_config(self) -> Mapping[str, Mapping[str, Param]]:
        """The default gate's explore configurations, then the nightly ones: every name `explore` knows."""
        return {**self.explore_configs, **self.nightly_configs}

    def scope(self, config: Mapping[str, Param]) -> str:
        """The vocabulary scope of `config` (a model's configuration): the mechanism's name unless it has scopes."""
        return self.name if self.scope_of is None else self.scope_of(config)

    def statement(self, name: str, config: Mapping[str, Param] | None = None) -> str:
        """The one-sentence statement of the property `name`, from its one source: `beyond_model` for a property no
        model states, else the `description` of the current variant's model of `config` (or of the first
        configuration whose model states it: a scope's reference may judge what only another scope's model
        states); "" for a name the mechanism does not know (such as `divergence`)."""
        known = self.beyond_model.get(name)
        if known is not None:
            return known.statement
        configs = [*([config] if config is not None else []), *self.explore_configs.values(),
                   *self.hypothesis_configs.values()]
        for each in configs:
            model = self.make_model(each, self.current)
            stated = {p.name: p.description for p in model.liveness} | {p.name: p.description for p in model.invariants}
            if name in stated:
                return stated[name]
        return ""

    def unnamed_divergence(self, config: Mapping[str, Param], detail: str) -> str:
        """What a bare divergence says about the harness: the variable it was first seen in (from the lockstep's
        detail, `state <variable>: ...`) and that variable's guard, which did not break in the steps the walk
        went on, or that no guard covers it: either way a defect of the harness, stated in one sentence."""
        if not detail.startswith("state "):
            return "a defect of the harness: an observation differed and no named invariant broke"
        variable = detail.removeprefix("state ").split(":", 1)[0]
        guard = self.guards.get(self.scope(config), {}).get(variable)
        if guard is None or not guard.by:
            why = f" ({guard.unguarded})" if guard is not None and guard.unguarded else ""
            return f"a defect of the harness: no named invariant guards {variable!r}{why}"
        return (f"a defect of the harness: {variable!r} differed and its guard(s) {', '.join(guard.by)} did not "
                f"break in the steps that followed")

    def for_config(self, config: Mapping[str, Param]) -> Mechanism:
        """The mechanism as the engines see it for `config`: without a reference where its scope is model-only."""
        if self.make_reference is None or self.scope(config) not in self.model_only:
            return self
        return replace(self, make_reference=None)
