"""The engines as a check runs them: each run of one engine on one configuration of a mechanism ends in a
`CheckResult`, with its finding's trace saved and its one-line detail written.

A `Checker` takes a `Mechanism` and never names one. What to run (the profile, the budgets, which variants)
and what a result means (a bug on the current variant, a catch on a twin, a known finding still found) are the
command line's: it plans the runs and judges their results. The loops here (`run_stateful`,
`run_conformance`) are also what `brokerspec bench` measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import Phase
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, Model, Param
from properties.engines import profiles
from properties.engines.conformance import NOT_EXECUTABLE, Conformance, Tour, conform
from properties.engines.counterexamples import shrunk
from properties.engines.coverage import Coverage, Recorder
from properties.engines.explorer import Finding
from properties.engines.graphs import Explored, Graphs, Say
from properties.engines.lockstep import DIVERGENCE
from properties.engines.mechanism import Mechanism
from properties.engines.replay import STUCK_KINDS, record
from properties.engines.result import CheckResult, Target
from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from traces.format import Trace, save

CONFORMANCE_STEPS = 150_000
"""Default steps of conformance replay per configuration: every transition of most configurations, and the
shallowest transitions first of the few larger ones (which the table then marks bounded)."""


def about(mechanism: Mechanism, config: Mapping[str, Param], name: str, shown: str = "") -> str:
    """"; NAME: its statement" (`Mechanism.statement`, the text `invariants` prints), for the end of a failing row's
    detail, after the trace's path; "" where `shown` already says it or the name has none (a divergence)."""
    statement = mechanism.statement(name, config)
    return f"; {name}: {statement}" if statement and statement != shown else ""


def run_stateful(
    mechanism: Mechanism, variant: str, config: Mapping[str, Param], seed: int, budget_s: float | None, profile: str,
    coverage: Coverage | None = None, batches_max: int | None = None,
) -> tuple[FailedRun | None, int, int, float]:
    """Hypothesis lockstep batches (seed, seed+1, ...) until a failure, `batches_max` batches or `budget_s`
    seconds, whichever comes first; (run, batches, steps, s). At least one batch always runs.

    A budget in batches is deterministic: the same seed runs the same examples on any machine under
    any load. Seconds are only a cap.

    With `coverage`, the runs also record the actions they took and the interesting states they
    reached into it (off by default: the bench measures steps/s without that overhead). Hypothesis'
    own shrinker is off: callers shrink the run with `properties.engines.shrink`, which takes seconds where
    Hypothesis' takes minutes on Key_Shared runs, and the time to a bug is then the time to find it.
    """
    profiled = profiles.use(profile)
    settings = Settings(profiled, phases=[p for p in profiled.phases if p is not Phase.shrink])
    found: list[FailedRun] = []
    steps = [0]
    recorder = Recorder(coverage, config) if coverage is not None else None

    def count(action: Action) -> None:
        steps[0] += 1
        if recorder is not None:
            recorder.step(action)

    def make_model() -> Model[Any]:
        model = mechanism.make_model(config, variant)
        return recorder.wrap(model) if recorder is not None else model

    make_reference = mechanism.for_config(config).make_reference
    machine = build_state_machine(
        make_model,
        mechanism.make_model(config, variant).action_names,
        (lambda: make_reference(config, variant)) if make_reference is not None else None,
        on_failure=found.append,
        on_step=count,
    )
    started = time.perf_counter()
    batches = 0
    run: FailedRun | None = None

    def more() -> bool:
        if batches == 0:
            return True
        if batches_max is not None and batches >= batches_max:
            return False
        return budget_s is None or time.perf_counter() - started < budget_s

    while run is None and more():
        error = find_failure(hypothesis_seed(seed + batches)(machine), settings)
        batches += 1
        if error is not None:
            run = found[-1] if found else FailedRun((), ("exception",), f"{type(error).__name__}: {error}")
    if recorder is not None:
        recorder.flush()
    return run, batches, steps[0], time.perf_counter() - started


def run_conformance(
    mechanism: Mechanism, variant: str, config_name: str, max_steps: int | None, max_states: int | None = None,
    workers: int = 1, planned: Tour | None = None, say: Say = lambda _: None,
) -> Conformance:
    """Every transition of the explorer's configuration `config_name`, replayed on the reference (the `planned`
    tour of its graph, where the caller has it)."""
    make_reference = mechanism.make_reference
    assert make_reference is not None
    config = mechanism.every_explore_config[config_name]
    model = mechanism.make_model(config, variant)
    label = f"{mechanism.name}/{variant}/{config_name}"
    say(f"  conformance {label}: every transition on the reference"
        + (f", at most {max_steps} steps" if max_steps is not None else ""))
    return conform(lambda: mechanism.make_model(config, variant), lambda: make_reference(model.config, variant),
                   max_states=max_states, max_steps=max_steps, terminal_ok=model.terminal_ok,
                   workers=workers, progress=lambda line: say(f"  conformance {label}: {line}"),
                   known=frozenset(mechanism.findings.get(config_name, {})), planned=planned)


@dataclass(frozen=True)
class Traces:
    """Where a check's findings go: each run recorded as a trace in `out`, with its HTML report (drawn by
    `render`) beside it."""

    out: Path
    render: Callable[[Trace], str]
    say: Say

    def save(
        self, mechanism: Mechanism, model: Model[Any], actions: Sequence[Action], engine: str, seed: int | None,
        finding: Finding | None = None, target: str | None = None,
    ) -> Path:
        """Record the run (in lockstep with the reference) and save it with its HTML report beside it.

        `engine` and the failure name the file. A liveness or deadlock `finding` breaks no invariant at its
        last state, so the trace records it for replay to judge that state again. The trace fails where the
        run breaks `target` (the finding's name, where there is a finding), the failure the row names, past
        any divergence on the way: its replay ends in what the row says.
        """
        make_reference = mechanism.for_config(model.config).make_reference
        implementation = make_reference(model.config, model.variant) if make_reference else None
        stuck = (finding.kind, finding.name) if finding is not None and finding.kind in STUCK_KINDS else None
        trace = record(model, actions, engine=engine.split("[")[0], seed=seed, implementation=implementation,
                       stuck=stuck, target=target or (finding.name if finding is not None else None))
        names = "-".join(str(n) for n in trace.failure.get("names", [])) or "run"  # type: ignore[union-attr]
        label = engine.replace("[", "-").replace("]", "")
        path = save(trace, self.out / mechanism.name / f"{model.variant}-{label}-{names}.json")
        html = path.with_suffix(".html")
        html.write_text(self.render(trace), encoding="utf-8")
        self.say(f"report: {html}")
        return path

    def reproduce(self, mechanism: Mechanism, model: Model[Any], path: Path) -> str:
        """The command that replays a saved trace to its failure, said as the check's `reproduce:` line: against
        the reference where one recorded it (its states are the reference's, which a model replay would call a
        divergence where the reference went wrong)."""
        against = " --against reference" if mechanism.for_config(model.config).make_reference else ""
        command = f"brokerspec replay {path}{against}"
        self.say(f"reproduce: {command}")
        return command


@dataclass(frozen=True)
class Checker:
    """Runs each engine on one configuration to a `CheckResult`: the graphs it reads (kept or searched), where
    its findings' traces go, where its progress lines go."""

    graphs: Graphs
    traces: Traces
    say: Say

    def explorer(self, mechanism: Mechanism, variant: str, config_name: str, *, expected: str | None = None,
                 judged: bool = True) -> list[CheckResult]:
        """The configuration's exploration (`Graphs`: kept or searched): its result, then, where the configuration
        has known findings and this is no twin's run, the result about those."""
        started = time.perf_counter()
        result = self.graphs.explored(mechanism, variant, config_name)
        config = mechanism.every_explore_config[config_name]
        coverage = None
        if variant == mechanism.current:
            action_names = tuple(mechanism.make_model(config, variant).action_names)
            coverage = result.portable(variant, action_names)
        known = mechanism.findings.get(config_name, {}) if expected is None else {}
        names = [f.name for f in result.findings if f.name not in known] if judged else []
        detail = f"{result.states} states, {result.transitions} transitions, depth {result.max_depth}"
        if not result.complete:
            detail += " (bounded)"
        if result.cached:
            detail += f" (graph cached: explored in {result.elapsed_s:.1f}s)"
        if known:
            detail += f"; known finding(s) {', '.join(known)} on the next row"
        target = None
        if names and (expected is None or expected in names):
            finding = next(f for f in result.findings if f.name == (expected or names[0]))
            model = mechanism.make_model(config, variant)
            path = self.traces.save(mechanism, model, finding.path, f"explorer[{config_name}]", None, finding)
            detail += f"; {finding.kind} {finding.name} in {len(finding.path)} steps ({finding.detail}): {path}"
            detail += about(mechanism, config, finding.name, finding.detail)
            target = Target(finding.name, len(finding.path), str(path), mechanism.statement(finding.name, config),
                            reproduce=self.traces.reproduce(mechanism, model, path))
        took = time.perf_counter() - started if result.cached else result.elapsed_s
        work = {"states": result.states, "transitions": result.transitions, "depth": result.max_depth}
        results = [CheckResult(mechanism.name, "explorer", config_name, variant, failures=tuple(names),
                               expected=expected, judged=judged, target=target, work=work, complete=result.complete,
                               coverage=coverage, seconds=took, detail=detail)]
        if known:
            results.append(self._known(mechanism, variant, config_name, result, known))
        return results

    def _known(self, mechanism: Mechanism, variant: str, config_name: str, result: Explored,
               known: Mapping[str, str]) -> CheckResult:
        """The configuration's known findings, each of which must still be found, as a twin must be caught.

        The trace is the first one found's (a shortest path: a later finding's path may pass through it, and a
        trace stops at its first failure).
        """
        found = {f.name: f for f in result.findings if f.name in known}
        detail = ", ".join(f"{name} in {len(f.path)} steps" for name, f in found.items())
        target = None
        if found:
            first = next(iter(found.values()))
            model = mechanism.make_model(mechanism.every_explore_config[config_name], variant)
            path = self.traces.save(mechanism, model, first.path, f"explorer[{config_name}]", None, first)
            detail += f"; trace of {first.name}: {path}"
            target = Target(first.name, len(first.path), str(path),
                            reproduce=self.traces.reproduce(mechanism, model, path))
        detail += f"; written up in {', '.join(dict.fromkeys(known.values()))}"
        return CheckResult(mechanism.name, "explorer", config_name, variant, subject=",".join(known),
                           failures=tuple(found), known=tuple(known), target=target, detail=detail)

    def conformance(self, mechanism: Mechanism, variant: str, config_name: str, *, steps: int | None,
                    max_states: int | None, workers: int) -> CheckResult:
        """The reference replays every explored transition of the configuration (its tour from `Graphs`, cut at
        `steps`); a model-only scope is not replayed."""
        config = mechanism.every_explore_config[config_name]
        if mechanism.for_config(config).make_reference is None:
            why = mechanism.model_only[mechanism.scope(config)]
            return CheckResult(mechanism.name, "conformance", config_name, variant, ran=False,
                               detail=f"model only: {why}")
        started = time.perf_counter()  # the result's time includes the search when the graph was not kept
        planned = self.graphs.tour(mechanism, variant, config_name, steps)
        result = run_conformance(mechanism, variant, config_name, steps, max_states, workers, planned, self.say)
        detail = result.summary()
        found = result.deviation
        target = None
        if found is not None and found.target == NOT_EXECUTABLE:  # nothing to record: the model cannot take it
            detail += f"; {found.detail}"
            target = Target(found.target, len(found.actions), harness_defect=found.detail)
        elif found is not None:
            model = mechanism.make_model(config, variant)
            actions = shrunk(mechanism, model.config, variant, found.actions, found.target) if found.actions else ()
            path = self.traces.save(mechanism, model, actions, f"conformance[{config_name}]", None,
                                    target=found.target)
            why = f" ({found.detail})" if found.detail else ""
            detail += f"; {found.target} in {len(actions)} steps{why}: {path}{about(mechanism, config, found.target)}"
            reproduce = self.traces.reproduce(mechanism, model, path)
            defect = None
            if found.target == DIVERGENCE:  # no invariant named it: the harness's own defect, said as such
                defect = mechanism.unnamed_divergence(config, found.detail)
                detail += f"; {defect}"
            target = Target(found.target, len(actions), str(path), mechanism.statement(found.target, config), defect,
                            reproduce)
        work = {"states": result.states, "transitions": result.edges, "covered": result.covered,
                "walks": result.walks, "steps": result.steps}
        return CheckResult(mechanism.name, "conformance", config_name, variant,
                           failures=found.failures if found is not None else (), target=target, work=work,
                           complete=result.complete, seconds=time.perf_counter() - started, detail=detail)

    def hypothesis(self, mechanism: Mechanism, variant: str, config_name: str, *, seed: int, budget_s: float | None,
                   profile: str, batches: int | None, expected: str | None = None,
                   judged: bool = True) -> CheckResult:
        """Hypothesis lockstep batches on the configuration (`run_stateful`), the failing run shrunk and saved."""
        config = mechanism.hypothesis_configs[config_name]
        cap = f", at most {budget_s:g}s" if budget_s is not None else ""
        self.say(f"  hypothesis {mechanism.name}/{variant}/{config_name}: {batches} batch(es){cap}, {profile}")
        coverage = None
        if variant == mechanism.current:
            coverage = Coverage.of(mechanism, variant, mechanism.make_model(config, variant).action_names)
        run, ran, steps, elapsed = run_stateful(mechanism, variant, config, seed, budget_s, profile, coverage,
                                                batches_max=batches)
        names = list(run.failures) if run is not None and judged else []
        detail = f"{steps} steps in {ran} batch(es) from seed {seed}"
        target = None
        if run is not None and run.actions:
            model = mechanism.make_model(config, variant)
            name = expected if expected in run.failures else run.failures[0]
            actions = shrunk(mechanism.for_config(config), model.config, model.variant, run.actions, name)
            path = self.traces.save(mechanism, model, actions, f"hypothesis[{config_name}]", seed, target=name)
            detail += f"; {name} in {len(actions)} steps: {path}{about(mechanism, config, name)}"
            target = Target(name, len(actions), str(path), mechanism.statement(name, config),
                            reproduce=self.traces.reproduce(mechanism, model, path))
        elif run is not None:
            detail += f"; {run.detail}"
            target = Target(names[0] if names else "exception", 0)
        return CheckResult(mechanism.name, "hypothesis", config_name, variant, failures=tuple(names),
                           expected=expected, judged=judged, target=target, work={"batches": ran, "steps": steps},
                           coverage=coverage.portable() if coverage is not None else None, seconds=elapsed,
                           detail=detail)

    def proofs(self, mechanism: Mechanism, depth: int) -> list[CheckResult]:
        """The mechanism's Z3 verdicts (none where it has no encoding), one result per proved or refuted invariant;
        a proof that must fail (a mutant's) expects its invariant broken."""
        if mechanism.proofs is None:
            return []
        self.say(f"  z3 {mechanism.name}: depth {depth}")
        return [CheckResult(mechanism.name, "z3", proof.system, "", subject=proof.invariant,
                            failures=() if proof.holds else (proof.invariant,),
                            expected=None if must_hold else proof.invariant, work={"depth": proof.depth},
                            seconds=proof.elapsed_s, detail=proof.summary())
                for proof, must_hold in mechanism.proofs(depth)]
