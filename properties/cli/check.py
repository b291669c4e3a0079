"""`brokerspec check`, `explore` and `prove`: the engines run over the registered mechanisms, with the verdict table.

The loops (`run_explorer`, `run_stateful`, `run_conformance`) are also what `brokerspec bench` measures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import queue
import resource
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import Phase
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, Model, Param
from properties.cli.common import PASS, VIOLATED, UsageError, _mechanisms, _model, _progress, _table, _width, _wrapped
from properties.cli.explored import Explored, Graphs
from properties.cli.report import render
from properties.engines import cache, interrupts, profiles
from properties.engines.conformance import Conformance, Tour, conform
from properties.engines.counterexamples import shrunk
from properties.engines.coverage import Coverage, Portable, Recorder
from properties.engines.explorer import Exploration, Finding, Progress, can_fork, explore
from properties.engines.lockstep import DIVERGENCE
from properties.engines.mechanism import Mechanism
from properties.engines.reduction import PartialOrder, PreemptionBounded, shortest_path
from properties.engines.replay import STUCK_KINDS, record
from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from traces.format import save

CONFORMANCE_STEPS = 150_000
"""Default steps of conformance replay per configuration: every transition of most configurations, and the
shallowest transitions first of the few larger ones (which the table then marks bounded)."""


class _Stop(Exception):
    """`check --fail-fast`: the first failing row ends the check."""


def _save_finding(
    out: Path, mechanism: Mechanism, model: Model[Any], actions: Sequence[Any], engine: str, seed: int | None,
    finding: Finding | None = None,
) -> Path:
    """Record the run (in lockstep with the reference) and save it with its HTML report beside it.

    `engine` and the failure name the file. A liveness or deadlock `finding` breaks no invariant at its
    last state, so the trace records it for replay to judge that state again.
    """
    make_reference = mechanism.for_config(model.config).make_reference
    implementation = make_reference(model.config, model.variant) if make_reference else None
    stuck = (finding.kind, finding.name) if finding is not None and finding.kind in STUCK_KINDS else None
    trace = record(model, actions, engine=engine.split("[")[0], seed=seed, implementation=implementation,
                   stuck=stuck)
    names = "-".join(str(n) for n in trace.failure.get("names", [])) or "run"  # type: ignore[union-attr]
    label = engine.replace("[", "-").replace("]", "")
    path = save(trace, out / mechanism.name / f"{model.variant}-{label}-{names}.json")
    html = path.with_suffix(".html")
    html.write_text(render(trace), encoding="utf-8")
    _progress(f"report: {html}")
    return path


def run_explorer(
    mechanism: Mechanism, variant: str, config_name: str, max_states: int | None, *, symmetry: bool = False,
    workers: int = 1, por: bool = False, preemption_bound: int | None = None,
) -> Exploration[Any]:
    model: Model[Any] = _model(mechanism, mechanism.every_explore_config[config_name], variant)
    unreduced = model
    try:
        if por:
            model = PartialOrder(model)
        if preemption_bound is not None:
            model = PreemptionBounded(model, preemption_bound)
    except ValueError as error:
        raise UsageError(f"{mechanism.name}/{config_name}: {error}") from error
    _progress(f"  explore {mechanism.name}/{variant}/{config_name}")

    def report(where: Progress) -> None:
        _progress(f"  explore {mechanism.name}/{variant}/{config_name}: {where.line()}")

    result = explore(model, max_states=max_states, progress=report, terminal_ok=getattr(model, "terminal_ok", None),
                     symmetry=symmetry, workers=workers)
    if por and preemption_bound is None:
        _shortest(result, unreduced, f"{mechanism.name}/{variant}/{config_name}")
    done = Progress(result.transitions, len(result.states), 0, result.max_depth, result.elapsed_s)
    _progress(f"  explore {mechanism.name}/{variant}/{config_name}: {'done' if result.complete else 'bounded'}: "
              f"{done.line()}")
    return result


def _shortest(result: Exploration[Any], model: Model[Any], label: str) -> None:
    """A reduced search's findings on their shortest paths (`reduction.shortest_path`), in place; the time goes
    into the search's."""
    started = time.perf_counter()
    for n, finding in enumerate(result.findings):
        if finding.kind != "invariant":
            continue
        found = shortest_path(model, finding.path, finding.name)
        result.findings[n] = replace(finding, path=found.path)
        _progress(f"  explore {label}: {finding.name}: {found.reduced} steps on the reduced graph, shortest "
                  f"{len(found.path)} (a full search to depth {len(found.path) - 1}: {found.confirmed_states} states)")
    result.elapsed_s += time.perf_counter() - started


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


@dataclass
class _Report:
    """The check's table and exit code; twins are judged per engine over all configurations."""

    rows: list[list[str]] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    found: list[dict[str, object]] = field(default_factory=list)
    """Per row, what failed: the invariant names, the trace and its length (empty where nothing failed)."""
    worst: int = PASS
    fail_fast: bool = False
    started: float = field(default_factory=time.perf_counter)
    coverage: dict[str, dict[str, Coverage]] = field(default_factory=dict)
    """By engine, then mechanism."""
    current_failed: set[tuple[str, str, str]] = field(default_factory=set)
    """(mechanism, engine, configuration) where the current variant failed: twins are not judged there."""
    on_row: Callable[[list[str], int, dict[str, object]], None] | None = None
    """Told every row as it is added (a forked check streams its rows to the parent)."""
    cpu_mark: float = field(default_factory=lambda: cpu_seconds())
    """CPU seconds of this process (and its reaped workers) when the last row was added."""

    def judged(self, mechanism: str, engine: str, config: str) -> bool:
        """A twin's catch counts only where the current variant passes the same configuration."""
        return (mechanism, engine, config) not in self.current_failed

    def add(self, row: list[str], code: int, found: dict[str, object] | None = None) -> None:
        """Add a row; `found["after_s"]`, where a forked check already measured it, is kept."""
        cpu, self.cpu_mark = self.cpu_mark, cpu_seconds()
        entry = {"after_s": round(time.perf_counter() - self.started, 3), "cpu_s": round(self.cpu_mark - cpu, 3),
                 **(found or {})}
        self.rows.append(row)
        self.codes.append(code)
        self.found.append(entry)
        self.worst = max(self.worst, code)
        if self.on_row is not None:
            self.on_row(row, code, entry)
        if code != PASS and self.fail_fast:
            raise _Stop

    def as_json(self) -> list[dict[str, object]]:
        keys = ("mechanism", "engine", "subject", "verdict", "detail", "time")
        return [{**dict(zip(keys, row, strict=True)), "code": code, **found}
                for row, code, found in zip(self.rows, self.codes, self.found, strict=True)]

    def junit(self, path: Path) -> None:
        """JUnit XML, one testcase per table row, so CI servers show each engine run and its failure."""
        suite = ET.Element("testsuite", name="brokerspec check", tests=str(len(self.rows)),
                           failures=str(sum(code != PASS for code in self.codes)))
        for (mechanism, engine, subject, verdict, detail, took), code in zip(self.rows, self.codes, strict=True):
            case = ET.SubElement(suite, "testcase", classname=f"brokerspec.{mechanism}", name=f"{engine} {subject}",
                                 time=took.removesuffix("s") or "0")
            if code != PASS:
                ET.SubElement(case, "failure", message=verdict, type=f"exit {code}").text = detail
            else:
                ET.SubElement(case, "system-out").text = f"{verdict}: {detail}"
        try:
            ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write: {exc.strerror}") from None

    def cover(self, engine: str, coverage: Coverage) -> None:
        """Merge one run's coverage into its engine's for its mechanism (current variant only: twins reach others)."""
        by_mechanism = self.coverage.setdefault(engine, {})
        if coverage.mechanism in by_mechanism:
            by_mechanism[coverage.mechanism].merge(coverage)
        else:
            by_mechanism[coverage.mechanism] = coverage


def _check_explorer(args: argparse.Namespace, mechanism: Mechanism, variant: str, report: _Report,
                    graphs: Graphs) -> bool:
    expected = mechanism.twins.get(variant)
    caught = False
    for config_name, config in _explore_configs(args, mechanism).items():
        if caught:
            break  # the twin is caught; its remaining configurations add nothing (as for Hypothesis)
        started = time.perf_counter()
        result = graphs.explored(mechanism, variant, config_name)
        if variant == mechanism.current:
            action_names = tuple(_model(mechanism, config, variant).action_names)
            report.cover("explorer", result.coverage(mechanism, variant, action_names))
        known = mechanism.findings.get(config_name, {}) if expected is None else {}
        names = [f.name for f in result.findings if f.name not in known]
        detail = f"{result.states} states, {result.transitions} transitions, depth {result.max_depth}"
        if not result.complete:
            detail += " (bounded)"
        if result.cached:
            detail += f" (graph cached: explored in {result.elapsed_s:.1f}s)"
        if known:
            detail += f"; known finding(s) {', '.join(known)} on the next row"
        verdict, code = _verdict(names, expected)
        if expected is None and names:
            report.current_failed.add((mechanism.name, "explorer", config_name))
        if expected is not None and not report.judged(mechanism.name, "explorer", config_name):
            verdict, names = "not judged (the current variant fails here)", []
        caught = caught or (expected is not None and expected in names)
        found: dict[str, object] = {}
        if names and (expected is None or expected in names):
            finding = next(f for f in result.findings if f.name == (expected or names[0]))
            model = _model(mechanism, config, variant)
            path = _save_finding(Path(args.out), mechanism, model, finding.path, f"explorer[{config_name}]", None,
                                 finding)
            detail += f"; {finding.kind} {finding.name} in {len(finding.path)} steps ({finding.detail}): {path}"
            detail += _about(mechanism, config, finding.name, finding.detail)
            found = {"failures": names, "target": finding.name, "steps": len(finding.path), "trace": str(path),
                     "statement": mechanism.statement(finding.name, config)}
            _progress(f"reproduce: brokerspec replay {path}")
        took = time.perf_counter() - started if result.cached else result.elapsed_s
        report.add([mechanism.name, f"explorer[{config_name}]", variant, verdict, detail, f"{took:.1f}s"],
                   code if expected is None else PASS, found)
        if known:
            _known_findings(args, mechanism, variant, config_name, result, report)
    return caught


def _known_findings(
    args: argparse.Namespace, mechanism: Mechanism, variant: str, config_name: str, result: Explored, report: _Report,
) -> None:
    """The configuration's known findings, on their own row: each must still be found, as a twin must be caught.

    The trace is the first one found's (a shortest path: a later finding's path may pass through it, and a
    trace stops at its first failure).
    """
    known = mechanism.findings[config_name]
    found = {f.name: f for f in result.findings if f.name in known}
    missed = [name for name in known if name not in found]
    detail = ", ".join(f"{name} in {len(f.path)} steps" for name, f in found.items())
    row: dict[str, object] = {"failures": list(found)}
    if found:
        first = next(iter(found.values()))
        model = _model(mechanism, mechanism.every_explore_config[config_name], variant)
        path = _save_finding(Path(args.out), mechanism, model, first.path, f"explorer[{config_name}]", None, first)
        detail += f"; trace of {first.name}: {path}"
        row.update(target=first.name, steps=len(first.path), trace=str(path))
        _progress(f"reproduce: brokerspec replay {path}")
    detail += f"; written up in {', '.join(dict.fromkeys(known.values()))}"
    verdict, code = ("known finding(s) found", PASS) if not missed else (f"FINDING MISSED {','.join(missed)}", VIOLATED)
    report.add([mechanism.name, f"explorer[{config_name}]", ",".join(known), verdict, detail, ""], code, row)


def _check_hypothesis(args: argparse.Namespace, mechanism: Mechanism, variant: str, report: _Report) -> bool:
    expected = mechanism.twins.get(variant)
    for config_name, config in mechanism.hypothesis_configs.items():
        cap = f", at most {args.budget:g}s" if args.budget is not None else ""
        label = f"{mechanism.name}/{variant}/{config_name}"
        _progress(f"  hypothesis {label}: {args.batches} batch(es){cap}, {args.profile}")
        coverage = None
        if variant == mechanism.current:
            coverage = Coverage.of(mechanism, variant, _model(mechanism, config, variant).action_names)
        run, batches, steps, elapsed = run_stateful(mechanism, variant, config, args.seed, args.budget, args.profile,
                                                    coverage, batches_max=args.batches)
        if coverage is not None:
            report.cover("hypothesis", coverage)
        names = list(run.failures) if run else []
        verdict, code = _verdict(names, expected)
        if expected is None and names:
            report.current_failed.add((mechanism.name, "hypothesis", config_name))
        if expected is not None and not report.judged(mechanism.name, "hypothesis", config_name):
            verdict, names = "not judged (the current variant fails here)", []
        detail = f"{steps} steps in {batches} batch(es) from seed {args.seed}"
        found: dict[str, object] = {}
        if run is not None and run.actions:
            model = _model(mechanism, config, variant)
            target = expected if expected in run.failures else run.failures[0]
            actions = shrunk(mechanism.for_config(config), model.config, model.variant, run.actions, target)
            path = _save_finding(Path(args.out), mechanism, model, actions, f"hypothesis[{config_name}]", args.seed)
            detail += f"; {target} in {len(actions)} steps: {path}{_about(mechanism, config, target)}"
            found = {"failures": names, "target": target, "steps": len(actions), "trace": str(path),
                     "statement": mechanism.statement(target, config)}
            _progress(f"reproduce: brokerspec replay {path}")
        elif run is not None:
            detail += f"; {run.detail}"
            found = {"failures": names, "target": names[0] if names else "exception", "steps": 0}
        report.add([mechanism.name, f"hypothesis[{config_name}]", variant, verdict, detail, f"{elapsed:.1f}s"],
                   code if expected is None else PASS, found)
        if expected is not None and expected in names:
            return True  # the twin is caught; the remaining configurations add nothing
    return False


def run_conformance(
    mechanism: Mechanism, variant: str, config_name: str, max_steps: int | None, max_states: int | None = None,
    workers: int = 1, planned: Tour | None = None,
) -> Conformance:
    """Every transition of the explorer's configuration `config_name`, replayed on the reference (the `planned`
    tour of its graph, where the caller has it)."""
    make_reference = mechanism.make_reference
    assert make_reference is not None
    config = mechanism.every_explore_config[config_name]
    model = _model(mechanism, config, variant)
    label = f"{mechanism.name}/{variant}/{config_name}"
    _progress(f"  conformance {label}: every transition on the reference"
              + (f", at most {max_steps} steps" if max_steps is not None else ""))
    return conform(lambda: mechanism.make_model(config, variant), lambda: make_reference(model.config, variant),
                   max_states=max_states, max_steps=max_steps, terminal_ok=getattr(model, "terminal_ok", None),
                   workers=workers, progress=lambda line: _progress(f"  conformance {label}: {line}"),
                   known=frozenset(mechanism.findings.get(config_name, {})), planned=planned)


def _check_conformance(args: argparse.Namespace, mechanism: Mechanism, variant: str, report: _Report,
                       graphs: Graphs) -> None:
    """The reference replays every explored transition (the current variant only: a twin's model shares its bug)."""
    if mechanism.make_reference is None or args.conformance_steps == 0:
        return  # no reference to replay on, or turned off
    for config_name, config in _explore_configs(args, mechanism).items():
        if mechanism.for_config(config).make_reference is None:
            why = mechanism.model_only[mechanism.scope(config)]
            report.add([mechanism.name, f"conformance[{config_name}]", variant, "not replayed",
                        f"model only: {why}", ""], PASS)
            continue
        steps = args.conformance_steps
        if steps is None:
            steps = mechanism.conformance_steps.get(config_name, CONFORMANCE_STEPS)
            cap = profiles.CHECK_PROFILES[args.profile].conformance_steps
            steps = steps if cap is None else min(steps, cap)
        started = time.perf_counter()  # the row's time includes the search when the graph was not kept
        planned = graphs.tour(mechanism, variant, config_name, steps)
        result = run_conformance(mechanism, variant, config_name, steps, args.max_states, args.workers, planned)
        detail = result.summary()
        found = result.deviation
        verdict, code = "pass", PASS
        if found is not None:
            model = _model(mechanism, config, variant)
            actions = shrunk(mechanism, model.config, variant, found.actions, found.target) if found.actions else ()
            path = _save_finding(Path(args.out), mechanism, model, actions, f"conformance[{config_name}]", None)
            verdict, code = f"VIOLATED {','.join(found.failures)}", VIOLATED
            why = f" ({found.detail})" if found.detail else ""
            detail += f"; {found.target} in {len(actions)} steps{why}: {path}{_about(mechanism, config, found.target)}"
            _progress(f"reproduce: brokerspec replay {path} --against reference")
            report.current_failed.add((mechanism.name, "conformance", config_name))
            finding = {"failures": list(found.failures), "target": found.target, "steps": len(actions),
                       "trace": str(path), "statement": mechanism.statement(found.target, config)}
            if found.target == DIVERGENCE:  # no invariant named it: the harness's own defect, said as such
                finding["harness_defect"] = mechanism.unnamed_divergence(config, found.detail)
                detail += f"; {finding['harness_defect']}"
        report.add([mechanism.name, f"conformance[{config_name}]", variant, verdict, detail,
                    f"{time.perf_counter() - started:.1f}s"], code, finding if found is not None else None)


def cmd_check(args: argparse.Namespace) -> int:
    if args.batches is None:
        args.batches = profiles.CHECK_PROFILES[args.profile].batches
    report = _Report(fail_fast=args.fail_fast)
    with contextlib.suppress(_Stop):
        _run_check(args, report)
    if not args.no_cache:
        cache.GraphCache(cache.default_folder()).prune()
    if not report.rows:
        raise UsageError("no mechanism to check")
    if args.junit:
        report.junit(Path(args.junit))
    if args.json:
        print(json.dumps({"rows": report.as_json(), "code": report.worst}, indent=1))
        return report.worst
    width = _width()
    print(_table(report.rows, ["mechanism", "engine", "variant/invariant", "verdict", "detail", "time"], long=4,
                 width=width))
    profile = profiles.CHECK_PROFILES[args.profile]
    for engine, by_mechanism in report.coverage.items() if not profile.quick else ():
        print(f"\ncoverage ({engine}, current variant):")
        for name, coverage in by_mechanism.items():
            print("\n".join(_wrapped(f"{name}: {coverage.summary()}", width, "    ", first="  ")))
    if profile.quick:
        print("\nquick profile: the smallest configurations only, without twins, Hypothesis or Z3 (the gate is "
              "`brokerspec check`)")
    print(f"\nbrokerspec check: {'PASS' if report.worst == PASS else 'FAIL'}")
    return report.worst


def _explore_configs(args: argparse.Namespace, mechanism: Mechanism) -> dict[str, Mapping[str, Param]]:
    """The explore configurations the profile checks: the quick ones, the gate's, or the gate's and the nightly."""
    profile = profiles.CHECK_PROFILES[args.profile]
    if profile.quick:
        names = mechanism.quick_configs or tuple(mechanism.explore_configs)[:1]
        return {name: mechanism.explore_configs[name] for name in names}
    return dict(mechanism.every_explore_config if profile.nightly else mechanism.explore_configs)


def _check_mechanism(args: argparse.Namespace, mechanism: Mechanism, report: _Report) -> None:
    """Every engine of the profile on one mechanism: its rows, in the order the table shows them."""
    profile = profiles.CHECK_PROFILES[args.profile]
    graphs = Graphs(None if args.no_cache else cache.default_folder(), args.max_states)
    variants = [args.variant] if args.variant else list(mechanism.variants)
    if profile.quick:
        variants = [v for v in variants if v == mechanism.current]
    for variant in variants:
        _model(mechanism, None, variant)
        expected = mechanism.twins.get(variant)
        if expected is None:
            _check_conformance(args, mechanism, variant, report, graphs)
        for engine in ("explorer", "hypothesis") if profile.hypothesis is not None else ("explorer",):
            if engine == "explorer":
                caught = _check_explorer(args, mechanism, variant, report, graphs)
            else:
                caught = _check_hypothesis(args, mechanism, variant, report)
            if not caught and expected is not None:
                report.add([mechanism.name, engine, variant, f"TWIN MISSED ({expected})",
                            "no configuration of this engine caught the known bug", ""], VIOLATED)
    if mechanism.proofs is not None and not args.variant and not profile.quick:
        _progress(f"  z3 {mechanism.name}: depth {args.depth}")
        for proof, must_hold in mechanism.proofs(args.depth):
            ok = proof.holds == must_hold
            verdict = ("proved" if proof.holds else "twin caught") if ok else (
                "PROOF FAILED" if must_hold else "TWIN MISSED")
            report.add([mechanism.name, f"z3[{proof.system}]", proof.invariant, verdict, proof.summary(),
                        f"{proof.elapsed_s:.1f}s"], PASS if ok else VIOLATED)


def _run_check(args: argparse.Namespace, report: _Report) -> None:
    """The mechanisms one after the other, or shared among `--workers` forked processes (each then replays with
    one): the rows are the same and in the same order either way, only the times differ."""
    mechanisms = _mechanisms(args.mechanism)
    workers = min(args.workers, len(mechanisms))
    if workers <= 1 or not can_fork():
        for mechanism in mechanisms:
            _check_mechanism(args, mechanism, report)
        return
    _run_parallel(argparse.Namespace(**{**vars(args), "workers": 1}), mechanisms, workers, report)


def cpu_seconds() -> float:
    """CPU seconds of this process and of the workers it has reaped (a conformance replay's forked ones)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _seconds(cell: str) -> float:
    """A row's time cell ("1.5s", or "" where it has none) in seconds."""
    return float(cell.removesuffix("s") or 0)


def _streamer(results: Any, index: int) -> Callable[[list[str], int, dict[str, object]], None]:
    """A forked check's `on_row`: every row goes to the parent as it is added, with its mechanism's index."""
    return lambda row, code, found: results.put(("row", index, (row, code, found)))


def _run_parallel(args: argparse.Namespace, mechanisms: Sequence[Mechanism], workers: int, report: _Report) -> None:
    """Each mechanism checked in a forked process, `workers` at a time, longest first by the last run's times
    (what it did not time first: the longest-processing-time rule); their rows are streamed back (so
    `--fail-fast` stops every process at the first failing row) and added mechanism by mechanism in the
    registry's order, as the serial check adds them."""
    timings = cache.GraphCache(None if args.no_cache else cache.default_folder())
    last: dict[str, float] = timings.get("timings", f"check-{args.profile}") or {}
    context = multiprocessing.get_context("fork")
    results: Any = context.Queue()
    todo: Any = context.SimpleQueue()  # no feeder thread in this process: it forks next
    for index in sorted(range(len(mechanisms)), key=lambda i: -last.get(mechanisms[i].name, float("inf"))):
        todo.put(index)
    for _ in range(workers):
        todo.put(None)

    def work() -> None:
        try:
            while (index := todo.get()) is not None:
                part = _Report(fail_fast=args.fail_fast, started=report.started, on_row=_streamer(results, index))
                try:
                    with contextlib.suppress(_Stop):
                        _check_mechanism(args, mechanisms[index], part)
                except UsageError as error:
                    results.put(("error", index, str(error)))
                    return
                results.put(("done", index, [(engine, covered.portable()) for engine, by in part.coverage.items()
                                             for covered in by.values()]))
        except BaseException as error:  # a defect of the harness: said, never a parent waiting for ever
            traceback.print_exc()
            results.put(("crash", -1, f"{type(error).__name__}: {error}"))
        finally:
            results.put(None)

    processes = [context.Process(target=interrupts.ignoring_interrupts(work), daemon=True) for _ in range(workers)]
    rows: dict[int, list[tuple[list[str], int, dict[str, object]]]] = {i: [] for i in range(len(mechanisms))}
    coverage: dict[int, list[tuple[str, Portable]]] = {}
    try:
        for process in processes:
            interrupts.start(process)
        finished, stop = 0, False
        while finished < workers and not stop:
            try:
                item = results.get(timeout=1.0)
            except queue.Empty:
                if not any(p.is_alive() for p in processes) and results.empty():
                    raise RuntimeError("a check worker ended without its rows") from None
                continue
            if item is None:
                finished += 1
                continue
            kind, index, payload = item
            if kind == "error":
                raise UsageError(payload)
            if kind == "crash":
                raise RuntimeError(f"a check worker failed: {payload}")
            if kind == "done":
                coverage[index] = payload
                continue
            rows[index].append(payload)
            stop = payload[1] != PASS and args.fail_fast
    finally:  # Ctrl-C, an error or --fail-fast before they are done: the workers, which ignore Ctrl-C, are stopped
        interrupts.stop([p for p in processes if p.pid is not None])
    if len(coverage) == len(mechanisms) and not args.fail_fast:  # every one ran to its end: its time orders the next
        took = {mechanisms[i].name: sum(_seconds(row[5]) for row, _, _ in rows[i]) for i in coverage}
        timings.put("timings", f"check-{args.profile}", took)
    with contextlib.suppress(_Stop):
        for index, mechanism in enumerate(mechanisms):
            for row, code, found in rows[index]:
                report.add(row, code, found)
            for engine, portable in coverage.get(index, []):
                report.cover(engine, Coverage.restored(mechanism, portable))


def _about(mechanism: Mechanism, config: Mapping[str, Param], name: str, shown: str = "") -> str:
    """"; NAME: its statement" (`Mechanism.statement`, the text `invariants` prints), for the end of a failing row's
    detail, after the trace's path; "" where `shown` already says it or the name has none (a divergence)."""
    statement = mechanism.statement(name, config)
    return f"; {name}: {statement}" if statement and statement != shown else ""


def _verdict(found: Sequence[str], expected: str | None) -> tuple[str, int]:
    """Current variants must pass; a known-bad variant must be caught on its invariant."""
    if expected is None:
        if not found:
            return "pass", PASS
        return f"VIOLATED {','.join(found)}", VIOLATED  # a divergence of the reference is a bug too; 2 is for ports
    if expected in found:
        return f"twin caught ({expected})", PASS
    return "not reached here", PASS


def cmd_prove(args: argparse.Namespace) -> int:
    rows = []
    worst = PASS
    for mechanism in _mechanisms(args.mechanism):
        if mechanism.proofs is None:
            rows.append([mechanism.name, "-", "-", "no Z3 encoding yet", "", ""])
            continue
        _progress(f"  prove {mechanism.name} to depth {args.depth}")
        for result, must_hold in mechanism.proofs(args.depth):
            ok = result.holds == must_hold
            role = "must hold" if must_hold else "twin: must fail"
            rows.append([mechanism.name, result.system, result.invariant, role, result.summary(),
                         f"{result.elapsed_s:.2f}s"])
            worst = max(worst, PASS if ok else VIOLATED)
    print(_table(rows, ["mechanism", "system", "invariant", "role", "result", "time"], long=4))
    return worst


def cmd_explore(args: argparse.Namespace) -> int:
    mechanism = _mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    if args.config is None:  # an empty name is a name, and refused below like any unknown one
        args.config = next(iter(mechanism.explore_configs))
    if args.config not in mechanism.every_explore_config:
        raise UsageError(f"unknown config {args.config!r} (known: {', '.join(mechanism.every_explore_config)})")
    result = run_explorer(mechanism, variant, args.config, args.max_states, symmetry=args.symmetry,
                          workers=args.workers, por=args.por, preemption_bound=args.preemption_bound)
    model = _model(mechanism, mechanism.every_explore_config[args.config], variant)
    reduced = ""
    if args.symmetry:
        reduced = " (one per orbit of the model's symmetry)" if result.symmetry else " (no symmetry here)"
    if args.por:
        reduced += " (partial-order reduced)"
    if args.preemption_bound is not None:
        reduced += f" (at most {args.preemption_bound} preemptions: complete only up to that bound)"
    ended = "complete" if result.complete else "bounded"
    print(f"{mechanism.name}/{variant}/{args.config}: {len(result.states)} states{reduced}, "
          f"{result.transitions} transitions, depth {result.max_depth}, {ended}, "
          f"{result.states_per_second:,.0f} states/s on {result.workers} process(es)")
    print("coverage: " + ", ".join(f"{k}={v}" for k, v in sorted(result.coverage.items())))
    for finding in result.findings:
        path = _save_finding(
            Path(args.out), mechanism, model, finding.path, f"explorer[{args.config}]", None, finding
        )
        print(f"{finding.kind} {finding.name}: {len(finding.path)} steps -> {path}")
        print(f"  {finding.detail}")
        print(f"  reproduce: brokerspec replay {path}")
    worst = VIOLATED if result.findings else PASS
    if args.conformance:
        worst = max(worst, _explore_conformance(args, mechanism, variant))
    return worst


def _explore_conformance(args: argparse.Namespace, mechanism: Mechanism, variant: str) -> int:
    """`explore --conformance`: every transition of the configuration replayed on the reference, the configuration's
    known findings allowed (its own explorer reports them)."""
    if mechanism.for_config(mechanism.every_explore_config[args.config]).make_reference is None:
        raise UsageError(f"{mechanism.name}/{args.config}: no reference implementation to replay on")
    result = run_conformance(mechanism, variant, args.config, None, args.max_states, args.workers)
    found = result.deviation
    verdict = "pass" if found is None else f"VIOLATED {','.join(found.failures)} ({found.target}: {found.detail})"
    print(f"conformance {mechanism.name}/{variant}/{args.config}: {verdict}: {result.summary()}, "
          f"{result.elapsed_s:.1f}s")
    return PASS if found is None else VIOLATED
