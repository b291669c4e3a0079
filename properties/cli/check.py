"""`brokerspec check`, `explore` and `prove`: the engines run over the registered mechanisms, with the verdict table.

The check is a loop: it plans the runs of a profile (mechanism, engine, configuration, variant), has the
engines floor run each to a `CheckResult` (`properties.engines.checks`), judges each result (a failure is a
bug on the current variant and a catch on a twin; a configuration's known findings must still be found; a
twin must be caught by some configuration of each engine) and renders the table, `--json` and JUnit from
the results and their verdicts.
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from properties.cli.common import (
    PASS,
    VIOLATED,
    UsageError,
    make_model,
    mechanisms,
    progress,
    table,
    table_width,
    wrapped,
)
from properties.cli.report import render
from properties.engines import cache, interrupts, profiles
from properties.engines.checks import CONFORMANCE_STEPS, Checker, Traces, run_conformance
from properties.engines.coverage import Coverage, Portable
from properties.engines.explorer import can_fork
from properties.engines.graphs import Graphs, reduced, search
from properties.engines.mechanism import Mechanism
from properties.engines.result import CheckResult


class _Stop(Exception):
    """`check --fail-fast`: the first failing row ends the check."""


@dataclass(frozen=True)
class Row:
    """A result as the check reports it: with its verdict and exit code, and when it was added."""

    result: CheckResult
    verdict: str
    code: int
    after_s: float
    """Seconds from the start of the check to this row."""

    def cells(self) -> list[str]:
        """The table's cells: mechanism, engine, subject, verdict, detail, time."""
        took = f"{self.result.seconds:.1f}s" if self.result.seconds is not None else ""
        return [self.result.mechanism, self.result.label, self.result.about, self.verdict, self.result.detail, took]

    def as_json(self) -> dict[str, object]:
        keys = ("mechanism", "engine", "subject", "verdict", "detail", "time")
        return {**dict(zip(keys, self.cells(), strict=True)), "code": self.code, "after_s": self.after_s,
                "cpu_s": self.result.cpu_s, **self.result.found()}


def judge(result: CheckResult) -> tuple[str, int]:
    """The verdict on one result and its exit code: a current variant must pass, a twin's run that finds its
    invariant caught it (one that does not fails nothing here: `TWIN MISSED` is judged over all configurations),
    every known finding must be found, a proof must hold or, for a mutant, fail."""
    if not result.ran:
        return "not replayed", PASS
    if result.engine == "z3":
        holds, must_hold = not result.failures, result.expected is None
        if holds == must_hold:
            return ("proved" if holds else "twin caught"), PASS
        return ("PROOF FAILED" if must_hold else "TWIN MISSED"), VIOLATED
    if result.known:
        missed = [name for name in result.known if name not in result.failures]
        return ("known finding(s) found", PASS) if not missed else (f"FINDING MISSED {','.join(missed)}", VIOLATED)
    if result.expected is None:
        if not result.failures:
            return "pass", PASS
        return f"VIOLATED {','.join(result.failures)}", VIOLATED  # a divergence of the reference is a bug too
    if not result.judged:
        return "not judged (the current variant fails here)", PASS
    if result.expected in result.failures:
        return f"twin caught ({result.expected})", PASS
    return "not reached here", PASS


@dataclass
class Report:
    """The check's rows and exit code; twins are judged per engine over all configurations."""

    rows: list[Row] = field(default_factory=list)
    worst: int = PASS
    fail_fast: bool = False
    started: float = field(default_factory=time.perf_counter)
    coverage: dict[str, dict[str, list[Portable]]] = field(default_factory=dict)
    """By engine, then mechanism: the coverage of each run that records one (current variant only: twins reach
    other states)."""
    current_failed: set[tuple[str, str, str]] = field(default_factory=set)
    """(mechanism, engine, configuration) where the current variant failed: twins are not judged there."""
    on_row: Callable[[Row], None] | None = None
    """Told every row as it is added (a forked check streams its rows to the parent)."""
    cpu_mark: float = field(default_factory=lambda: cpu_seconds())
    """CPU seconds of this process (and its reaped workers) when the last row was added."""

    def judged(self, mechanism: str, engine: str, config: str) -> bool:
        """A twin's catch counts only where the current variant passes the same configuration."""
        return (mechanism, engine, config) not in self.current_failed

    def add(self, result: CheckResult, verdict: str | None = None, code: int = PASS) -> None:
        """Add a result with its verdict (default: `judge`'s), timed now."""
        if verdict is None:
            verdict, code = judge(result)
        cpu, self.cpu_mark = self.cpu_mark, cpu_seconds()
        timed = replace(result, cpu_s=round(self.cpu_mark - cpu, 3))
        self.add_row(Row(timed, verdict, code, round(time.perf_counter() - self.started, 3)))

    def add_row(self, row: Row) -> None:
        """Add a row as it was timed (a forked check's, in the parent)."""
        result = row.result
        if result.expected is None and result.failures and not result.known:
            self.current_failed.add((result.mechanism, result.engine, result.config))
        if result.coverage is not None:
            self.coverage.setdefault(result.engine, {}).setdefault(result.mechanism, []).append(result.coverage)
        self.rows.append(row)
        self.worst = max(self.worst, row.code)
        if self.on_row is not None:
            self.on_row(row)
        if row.code != PASS and self.fail_fast:
            raise _Stop

    def as_json(self) -> list[dict[str, object]]:
        return [row.as_json() for row in self.rows]

    def junit(self, path: Path) -> None:
        """JUnit XML, one testcase per table row, so CI servers show each engine run and its failure."""
        suite = ET.Element("testsuite", name="brokerspec check", tests=str(len(self.rows)),
                           failures=str(sum(row.code != PASS for row in self.rows)))
        for row in self.rows:
            mechanism, engine, subject, verdict, detail, took = row.cells()
            case = ET.SubElement(suite, "testcase", classname=f"brokerspec.{mechanism}", name=f"{engine} {subject}",
                                 time=took.removesuffix("s") or "0")
            if row.code != PASS:
                ET.SubElement(case, "failure", message=verdict, type=f"exit {row.code}").text = detail
            else:
                ET.SubElement(case, "system-out").text = f"{verdict}: {detail}"
        try:
            ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write: {exc.strerror}") from None

    def covered(self, engine: str, mechanism: Mechanism) -> Coverage:
        """What the engine's runs on `mechanism` covered, all together."""
        first, *rest = self.coverage[engine][mechanism.name]
        covered = Coverage.restored(mechanism, first)
        for more in rest:
            covered.merge(Coverage.restored(mechanism, more))
        return covered


def cmd_check(args: argparse.Namespace) -> int:
    if args.batches is None:
        args.batches = profiles.CHECK_PROFILES[args.profile].batches
    report = Report(fail_fast=args.fail_fast)
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
    columns = table_width()
    print(table([row.cells() for row in report.rows], ["mechanism", "engine", "variant/invariant", "verdict",
                                                          "detail", "time"], long=4, width=columns))
    profile = profiles.CHECK_PROFILES[args.profile]
    by_name = {mechanism.name: mechanism for mechanism in mechanisms(args.mechanism)}
    for engine, by_mechanism in report.coverage.items() if not profile.quick else ():
        print(f"\ncoverage ({engine}, current variant):")
        for name in by_mechanism:
            summary = report.covered(engine, by_name[name]).summary()
            print("\n".join(wrapped(f"{name}: {summary}", columns, "    ", first="  ")))
    if profile.quick:
        print("\nquick profile: the smallest configurations only, without twins, Hypothesis or Z3 (the gate is "
              "`brokerspec check`)")
    print(f"\nbrokerspec check: {'PASS' if report.worst == PASS else 'FAIL'}")
    return report.worst


def _explore_configs(args: argparse.Namespace, mechanism: Mechanism) -> list[str]:
    """The explore configurations the profile checks: the quick ones, the gate's, or the gate's and the nightly."""
    profile = profiles.CHECK_PROFILES[args.profile]
    if profile.quick:
        return list(mechanism.quick_configs or tuple(mechanism.explore_configs)[:1])
    return list(mechanism.every_explore_config if profile.nightly else mechanism.explore_configs)


def _conformance_steps(args: argparse.Namespace, mechanism: Mechanism, config_name: str) -> int | None:
    """The steps a configuration's replay may take: `--conformance-steps`, else the mechanism's budget for it
    capped by the profile's."""
    if args.conformance_steps is not None:
        return int(args.conformance_steps)
    steps = mechanism.conformance_steps.get(config_name, CONFORMANCE_STEPS)
    cap = profiles.CHECK_PROFILES[args.profile].conformance_steps
    return steps if cap is None else min(steps, cap)


def _engine_runs(args: argparse.Namespace, checker: Checker, mechanism: Mechanism, variant: str, engine: str,
                 report: Report) -> Iterator[CheckResult]:
    """One engine's results on a variant, configuration after configuration; a twin's stop at its catch (the
    remaining configurations add nothing)."""
    expected = mechanism.twins.get(variant)
    configs = _explore_configs(args, mechanism) if engine == "explorer" else list(mechanism.hypothesis_configs)
    for config_name in configs:
        judged = expected is None or report.judged(mechanism.name, engine, config_name)
        if engine == "explorer":
            results = checker.explorer(mechanism, variant, config_name, expected=expected, judged=judged)
        else:
            results = [checker.hypothesis(mechanism, variant, config_name, seed=args.seed, budget_s=args.budget,
                                          profile=args.profile, batches=args.batches, expected=expected,
                                          judged=judged)]
        yield from results
        if expected is not None and expected in results[0].failures:
            return


def _check_mechanism(args: argparse.Namespace, mechanism: Mechanism, report: Report) -> None:
    """Every engine of the profile on one mechanism: its rows, in the order the table shows them."""
    profile = profiles.CHECK_PROFILES[args.profile]
    graphs = Graphs(None if args.no_cache else cache.default_folder(), args.max_states, progress)
    checker = Checker(graphs, Traces(Path(args.out), render, progress), progress)
    variants = [args.variant] if args.variant else list(mechanism.variants)
    if profile.quick:
        variants = [v for v in variants if v == mechanism.current]
    for variant in variants:
        make_model(mechanism, None, variant)
        expected = mechanism.twins.get(variant)
        if expected is None and mechanism.make_reference is not None and args.conformance_steps != 0:
            for config_name in _explore_configs(args, mechanism):
                report.add(checker.conformance(mechanism, variant, config_name, max_states=args.max_states,
                                               steps=_conformance_steps(args, mechanism, config_name),
                                               workers=args.workers))
        for engine in ("explorer", "hypothesis") if profile.hypothesis is not None else ("explorer",):
            caught = False
            unjudged: list[str] = []
            for result in _engine_runs(args, checker, mechanism, variant, engine, report):
                report.add(result)
                caught = caught or (expected is not None and expected in result.failures)
                unjudged += [] if result.judged else [result.config]
            if not caught and expected is not None:
                report.add(*_uncaught(mechanism, engine, variant, expected, unjudged))
    if not args.variant and not profile.quick:
        for result in checker.proofs(mechanism, args.depth):
            report.add(result)


def _uncaught(mechanism: Mechanism, engine: str, variant: str, expected: str,
              unjudged: Sequence[str]) -> tuple[CheckResult, str, int]:
    """The row of a twin no configuration of `engine` caught: missed when every configuration judged it; not
    judged when some did not (the current variant fails there, and its failing row is the check's verdict: a
    catch there would count for nothing, so a miss cannot be told either)."""
    if unjudged:
        return (CheckResult(mechanism.name, engine, "", variant, expected=expected, judged=False,
                            detail=f"no judged configuration of this engine caught the known bug; not judged in "
                                   f"{', '.join(unjudged)}, where the current variant fails"),
                f"not judged ({expected})", PASS)
    return (CheckResult(mechanism.name, engine, "", variant, expected=expected,
                        detail="no configuration of this engine caught the known bug"), f"TWIN MISSED ({expected})",
            VIOLATED)


def _run_check(args: argparse.Namespace, report: Report) -> None:
    """The mechanisms one after the other, or shared among `--workers` forked processes (each then replays with
    one): the rows are the same and in the same order either way, only the times differ."""
    chosen = mechanisms(args.mechanism)
    workers = min(args.workers, len(chosen))
    if workers <= 1 or not can_fork():
        for mechanism in chosen:
            _check_mechanism(args, mechanism, report)
        return
    _run_parallel(argparse.Namespace(**{**vars(args), "workers": 1}), chosen, workers, report)


def cpu_seconds() -> float:
    """CPU seconds of this process and of the workers it has reaped (a conformance replay's forked ones)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _seconds(cell: str) -> float:
    """A row's time cell ("1.5s", or "" where it has none) in seconds."""
    return float(cell.removesuffix("s") or 0)


def _streamer(results: Any, index: int) -> Callable[[Row], None]:
    """A forked check's `on_row`: every row goes to the parent as it is added, with its mechanism's index."""
    return lambda row: results.put(("row", index, row))


def _run_parallel(args: argparse.Namespace, mechanisms: Sequence[Mechanism], workers: int, report: Report) -> None:
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
                part = Report(fail_fast=args.fail_fast, started=report.started, on_row=_streamer(results, index))
                try:
                    with contextlib.suppress(_Stop):
                        _check_mechanism(args, mechanisms[index], part)
                except UsageError as error:
                    results.put(("error", index, str(error)))
                    return
                results.put(("done", index, None))
        except BaseException as error:  # a defect of the harness: said, never a parent waiting for ever
            traceback.print_exc()
            results.put(("crash", -1, f"{type(error).__name__}: {error}"))
        finally:
            results.put(None)

    processes = [context.Process(target=interrupts.ignoring_interrupts(work), daemon=True) for _ in range(workers)]
    rows: dict[int, list[Row]] = {i: [] for i in range(len(mechanisms))}
    done: set[int] = set()
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
                done.add(index)
                continue
            rows[index].append(payload)
            stop = payload.code != PASS and args.fail_fast
    finally:  # Ctrl-C, an error or --fail-fast before they are done: the workers, which ignore Ctrl-C, are stopped
        interrupts.stop([p for p in processes if p.pid is not None])
    if len(done) == len(mechanisms) and not args.fail_fast:  # every one ran to its end: its time orders the next
        took = {mechanisms[i].name: sum(_seconds(row.cells()[5]) for row in rows[i]) for i in done}
        timings.put("timings", f"check-{args.profile}", took)
    with contextlib.suppress(_Stop):
        for index in range(len(mechanisms)):
            for row in rows[index]:  # the coverage of a mechanism stopped before its end is left out
                report.add_row(row if index in done else replace(row, result=replace(row.result, coverage=None)))


def cmd_prove(args: argparse.Namespace) -> int:
    rows = []
    worst = PASS
    for mechanism in mechanisms(args.mechanism):
        if mechanism.proofs is None:
            rows.append([mechanism.name, "-", "-", "no Z3 encoding yet", "", ""])
            continue
        progress(f"  prove {mechanism.name} to depth {args.depth}")
        for result, must_hold in mechanism.proofs(args.depth):
            ok = result.holds == must_hold
            role = "must hold" if must_hold else "twin: must fail"
            rows.append([mechanism.name, result.system, result.invariant, role, result.summary(),
                         f"{result.elapsed_s:.2f}s"])
            worst = max(worst, PASS if ok else VIOLATED)
    print(table(rows, ["mechanism", "system", "invariant", "role", "result", "time"], long=4))
    return worst


def cmd_explore(args: argparse.Namespace) -> int:
    mechanism = mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    if args.config is None:  # an empty name is a name, and refused below like any unknown one
        args.config = next(iter(mechanism.explore_configs))
    if args.config not in mechanism.every_explore_config:
        raise UsageError(f"unknown config {args.config!r} (known: {', '.join(mechanism.every_explore_config)})")
    model = make_model(mechanism, mechanism.every_explore_config[args.config], variant)
    try:
        searched = reduced(model, args.por, args.preemption_bound)
    except ValueError as error:
        raise UsageError(f"{mechanism.name}/{args.config}: {error}") from error
    result = search(searched, f"{mechanism.name}/{variant}/{args.config}", progress, max_states=args.max_states,
                    symmetry=args.symmetry, workers=args.workers,
                    unreduced=model if args.por and args.preemption_bound is None else None)
    reduction = ""
    if args.symmetry:
        reduction = " (one per orbit of the model's symmetry)" if result.symmetry else " (no symmetry here)"
    if args.por:
        reduction += " (partial-order reduced)"
    if args.preemption_bound is not None:
        reduction += f" (at most {args.preemption_bound} preemptions: complete only up to that bound)"
    ended = "complete" if result.complete else "bounded"
    print(f"{mechanism.name}/{variant}/{args.config}: {len(result.states)} states{reduction}, "
          f"{result.transitions} transitions, depth {result.max_depth}, {ended}, "
          f"{result.states_per_second:,.0f} states/s on {result.workers} process(es)")
    print("coverage: " + ", ".join(f"{k}={v}" for k, v in sorted(result.coverage.items())))
    traces = Traces(Path(args.out), render, progress)
    for finding in result.findings:
        path = traces.save(mechanism, model, finding.path, f"explorer[{args.config}]", None, finding)
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
    result = run_conformance(mechanism, variant, args.config, None, args.max_states, args.workers, say=progress)
    found = result.deviation
    verdict = "pass" if found is None else f"VIOLATED {','.join(found.failures)} ({found.target}: {found.detail})"
    print(f"conformance {mechanism.name}/{variant}/{args.config}: {verdict}: {result.summary()}, "
          f"{result.elapsed_s:.1f}s")
    return PASS if found is None else VIOLATED
