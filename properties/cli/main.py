"""The `brokerspec` command line.

Exit codes: 0 pass, 1 invariant violated (or a known-bad variant not caught), 2 divergence from a
port, 3 usage or input error, 4 infrastructure failure. Every failure prints the command that
reproduces it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from models.core import Model
from properties import registry
from properties.cli.check import cmd_check, cmd_explore, cmd_prove, judge
from properties.cli.common import (
    DIVERGED,
    INFRA,
    INTERRUPTED,
    PASS,
    USAGE,
    VIOLATED,
    Parser,
    UsageError,
    at_least,
    load_trace,
    make_model,
    mechanisms,
    name,
    progress,
    seconds,
    table,
)
from properties.cli.invariants import cmd_invariants
from properties.cli.jvm import cmd_replay_jvm, cmd_shrink_jvm
from properties.cli.ports import (
    MIN_STEP_TIMEOUT_S,
    MODEL_ONLY_NOTE,
    add_verify_parser,
    recorded_on_port,
    replay_on_port,
    sent_by_verify,
    shrink_on_port,
)
from properties.cli.promote import CORPUS, promote
from properties.cli.report import render
from properties.engines import profiles
from properties.engines.checks import CONFORMANCE_STEPS
from properties.engines.counterexamples import shrunk
from properties.engines.lockstep import DIVERGENCE
from properties.engines.protocol import describe
from properties.engines.replay import STUCK_KINDS, record
from properties.engines.shrink import shrink, stuck_oracle
from properties.registry import replay, validate
from traces.format import Trace, TraceError, save


def cmd_replay(args: argparse.Namespace) -> int:
    if args.jvm is not None:
        return cmd_replay_jvm(args)
    trace = load_trace(args.trace)
    if args.port is not None:
        return replay_on_port(args, trace)
    try:
        result = replay(trace, args.trace, against=args.against, variant=args.variant)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    label = f"{trace.mechanism}/{args.variant or trace.variant} against the {args.against}"
    if recorded_on_port(trace):
        label += f" ({MODEL_ONLY_NOTE})"
    if result.ok:
        print(f"{args.trace}: {result.steps} states replayed on {label}: no invariant violated")
        return PASS
    print(f"{args.trace}: step {result.step}: {', '.join(result.failures)} on {label}. {result.detail}".rstrip())
    return DIVERGED if result.failures == (DIVERGENCE,) else VIOLATED


def _validated(trace: Trace, source: str, check_vars: bool = True) -> Model[Any]:
    """The input check every trace command shares (`properties.engines.replay.validate`), as a usage error."""
    try:
        return validate(trace, source, check_vars=check_vars)
    except TraceError as exc:
        raise UsageError(str(exc)) from None


def _writable(path: Path) -> Path:
    """`path`, refused unless its folder exists: a mistyped `-o` must not create folders anywhere (as root,
    at the filesystem's root)."""
    if not path.parent.is_dir():
        raise UsageError(f"{path}: cannot write: the folder {path.parent} does not exist")
    return path


def cmd_shrink(args: argparse.Namespace) -> int:
    if args.jvm is not None:
        return cmd_shrink_jvm(args)
    trace = load_trace(args.trace)
    on_port = recorded_on_port(trace)
    model = _validated(trace, args.trace, check_vars=not on_port)  # a port's trace holds the port's states
    if args.port is None and on_port:  # the model alone never fails as the port did
        raise UsageError(f"{args.trace}: the trace was recorded on a port: shrink it against the port with "
                         f"--port ARGV (the port's command line, last on the line)")
    names = trace.failure.get("names")
    if not isinstance(names, list) or not names:
        raise UsageError(f"{args.trace}: the trace records no failure to shrink toward")
    source = Path(args.trace)
    out = _writable(Path(args.output) if args.output
                    else source.with_name(source.name.removesuffix(".json") + ".shrunk.json"))
    mechanism = registry.mechanism_for(trace, args.trace)
    target = str(names[0])
    if args.port is not None:
        return shrink_on_port(args, trace, target, out)
    kind = trace.failure.get("kind")
    stuck = (str(kind), target) if kind in STUCK_KINDS else None
    try:
        if stuck is not None:  # a liveness or deadlock finding: the last state must stay stuck
            oracle = stuck_oracle(lambda: mechanism.make_model(model.config, model.variant), *stuck)
            if not oracle(trace.actions):
                raise ValueError(target)
            actions = shrink(trace.actions, oracle, model=mechanism.make_model(model.config, model.variant))
        else:
            actions = shrunk(mechanism, model.config, model.variant, trace.actions, target)
    except (ValueError, TraceError):
        raise UsageError(f"{args.trace}: the trace no longer fails with {target}") from None
    implementation = mechanism.make_reference(model.config, model.variant) if mechanism.make_reference else None
    try:
        save(record(model, actions, engine=f"{trace.engine}+shrink", seed=trace.seed,
                    implementation=implementation, stuck=stuck, target=target), out)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write: {exc.strerror}") from None
    print(f"{args.trace}: {len(trace.actions)} -> {len(actions)} steps, still {target}: {out}")
    return PASS


def cmd_promote(args: argparse.Namespace) -> int:
    try:
        test_path, saved = promote(Path(args.trace), Path(args.tests_dir), args.name, Path(args.corpus), args.force)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{exc.filename or args.tests_dir}: cannot write: {exc.strerror}") from None
    print(f"saved the trace as {saved}")
    print(f"wrote {test_path}")
    return PASS


def cmd_report(args: argparse.Namespace) -> int:
    trace = load_trace(args.trace)
    _validated(trace, args.trace)
    out = Path(args.out or str(Path(args.trace).with_suffix(".html")))
    try:
        out.write_text(render(trace), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{out}: cannot write: {exc.strerror}") from None
    print(f"wrote {out}")
    return PASS


def cmd_bench(args: argparse.Namespace) -> int:
    from properties.cli.bench import INDEX, bench, write_report

    if args.pipeline is not None:  # the Spark pipeline's throughput instead (properties/cli/pipeline_bench.py)
        from properties.cli.pipeline_bench import pipeline_bench
        from properties.pipeline.check import SparkUnavailable
        from properties.pipeline.schema import logged

        try:
            print(pipeline_bench(args.mechanism or logged(), args.pipeline, Path(args.out), seed=args.seed,
                                 as_json=args.json, progress=progress))
        except (KeyError, ValueError) as exc:
            raise UsageError(f"bench --pipeline: {exc.args[0]}") from None
        except OSError as exc:
            raise UsageError(f"{exc.filename or args.out}: cannot write: {exc.strerror}") from None
        except SparkUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return INFRA
        return PASS

    if args.gate:  # the check as a gate (properties/cli/gate_bench.py)
        from properties.cli.gate_bench import as_json, gate_bench, markdown

        runs, kills = gate_bench(mechanisms(args.mechanism), progress=progress)
        print(json.dumps(as_json(runs, kills), indent=1) if args.json else markdown(runs, kills))
        return PASS if all(run.code == PASS for run in runs) and all(kill.killed for kill in kills) else VIOLATED

    folder = Path(args.out)
    chosen = mechanisms(args.mechanism)
    try:
        folder.mkdir(parents=True, exist_ok=True)  # fail before measuring, not after
    except OSError as exc:
        raise UsageError(f"{folder}: cannot write: {exc.strerror}") from None
    results = []
    for mechanism in chosen:
        progress(f"  bench {mechanism.name}")
        results.append(bench(mechanism, seconds=args.seconds, seed=args.seed, folder=folder))
        page = write_report(folder, mechanism, results[-1])
        progress(f"wrote {page}")
    progress(f"bench pages: {folder / INDEX}")
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        rows = [[str(r["mechanism"]), k, str(v)] for r in results for k, v in r.items() if k != "mechanism"]
        print(table(rows, ["mechanism", "measure", "value"]))
    return PASS


def cmd_mutants(args: argparse.Namespace) -> int:
    """Run the default check on each planted bug and say whether it was killed by name, how fast, how short."""
    from properties.cli import mutants

    try:
        if args.patch:
            found = [mutants.load(Path(p)) for p in args.patch]
        else:
            found = mutants.discover(Path(args.dir), args.mechanism)
    except mutants.MutantError as exc:
        raise UsageError(str(exc)) from None
    if not found:
        raise UsageError(f"{args.dir}: no mutant (*.patch) to run")
    rows, worst = [], PASS
    for mutant in found:
        mechanism = mechanisms([mutant.mechanism])[0]
        progress(f"  mutant {mutant.name} ({mutant.mechanism}, must break {mutant.kills})")
        try:
            kill = mutants.run(mutant, current=mechanism.current, timeout_s=args.timeout)
        except mutants.MutantError as exc:
            raise UsageError(str(exc)) from None
        verdict = "killed" if kill.killed else "SURVIVED"
        worst = max(worst, PASS if kill.killed else VIOLATED)
        rows.append([mutant.name, mutant.kills, verdict, kill.target, kill.engine, str(kill.steps),
                     f"{kill.after_s:.1f}s", kill.detail[:100]])
    print(table(rows, ["mutant", "must break", "verdict", "found", "engine", "steps", "time", "detail"]))
    return worst


def cmd_simulate(args: argparse.Namespace) -> int:
    from properties.pipeline.simulate import simulate

    try:
        sim = simulate(args.mechanism, args.events, Path(args.out), partitions=args.partitions, fault=args.fault,
                       seed=args.seed, corrupt=args.corrupt, progress=progress)
    except (KeyError, ValueError) as exc:
        raise UsageError(f"simulate: {exc.args[0]}") from None
    faulted = f", {args.fault} in partitions {list(sim.faulted)}" if sim.faulted else ""
    print(f"wrote {sim.path}: {sim.events} events in {sim.partitions} partitions{faulted}, "
          f"{sim.corrupt_lines} malformed lines")
    return PASS


def cmd_pipeline_check(args: argparse.Namespace) -> int:
    from properties.pipeline.check import SparkUnavailable, check, result
    from properties.pipeline.schema import spec

    try:
        spec(args.mechanism)
    except KeyError as exc:
        raise UsageError(f"pipeline check: {exc.args[0]}") from None
    if not Path(args.input).exists():
        raise UsageError(f"pipeline check: {args.input}: no such file or directory")
    try:
        summary = check(args.mechanism, Path(args.input), Path(args.out), master=args.master,
                        progress=None if args.json else progress, conformance=args.conformance)
    except SparkUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return INFRA
    ran = result(summary)
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
    else:
        print(ran.detail)
        for key, path in summary["traces"].items():
            print(f"  partition {key}: reproduce: brokerspec replay {path}")
        for key, why in summary["incomplete_partitions"].items():
            print(f"  partition {key}: incomplete (not a violation): {why}")
        print(f"summary: {Path(args.out) / 'summary.json'}")
    if summary["unusable"]:
        print(f"error: pipeline check: {summary['unusable']}", file=sys.stderr)
        return USAGE
    return judge(ran)[1]


def cmd_pipeline_explore(args: argparse.Namespace) -> int:
    from properties.pipeline.check import SparkUnavailable, session
    from properties.pipeline.explore import explore as spark_explore

    mechanism = mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    make_model(mechanism, None, variant)  # a usage error for an unknown variant
    try:
        spark = session(args.master)
    except SparkUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return INFRA
    progress(f"  pipeline explore {mechanism.name}/{variant}: {args.seeds} seeds of {args.steps} steps")
    findings, failing = spark_explore(spark, mechanism.name, args.seeds, Path(args.out), variant=variant,
                                      steps=args.steps, first_seed=args.seed)
    print(f"{mechanism.name}/{variant}: {args.seeds} seeds, {failing} failing")
    for finding in findings:
        print(f"  seed {finding.seed}: {finding.invariant}, {finding.steps} -> {finding.shrunk_steps} steps: "
              f"{finding.trace}")
        print(f"  reproduce: brokerspec replay {finding.trace}")
    return VIOLATED if failing else PASS


def cmd_protocol(args: argparse.Namespace) -> int:
    mechanism = mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    if variant not in mechanism.variants:
        raise UsageError(f"unknown variant {variant!r} for {mechanism.name} (known: {', '.join(mechanism.variants)})")
    chosen = None if args.config is None else sent_by_verify(mechanism, args.config, variant)  # as verify sends
    print(describe(mechanism, variant, as_json=args.json, chosen=chosen))
    return PASS


def parser() -> argparse.ArgumentParser:
    parser = Parser(prog="brokerspec", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    names = ", ".join(registry.mechanisms())

    def common(p: argparse.ArgumentParser, many: bool = True) -> None:
        if many:
            p.add_argument("--mechanism", action="append", help=f"limit to this mechanism (repeatable): {names}")
        p.add_argument("--seed", type=int, default=0, help="seed for Hypothesis (default 0)")

    check = sub.add_parser("check", help="every engine on every mechanism, with a summary table")
    common(check)
    check.add_argument("--variant", type=name, help="only this variant (default: current and its known-bad twins)")
    check.add_argument("--batches", type=at_least(1), default=None,
                       help="Hypothesis batches per configuration, seeds SEED, SEED+1, ... (default: the profile's, 1 "
                            "in ci and dev, 3 in nightly; deterministic)")
    check.add_argument("--budget", type=at_least(0.0, float), default=None,
                       help="optional cap in seconds on each configuration's Hypothesis batches (default: none)")
    check.add_argument("--conformance-steps", type=at_least(0), default=None,
                       help=f"replayed steps per configuration for the conformance exploration (default "
                            f"{CONFORMANCE_STEPS:,}, or less where a mechanism says so for a large "
                            f"configuration; 0 turns it off)")
    check.add_argument("--profile", default="ci", choices=tuple(profiles.CHECK_PROFILES),
                       help="quick (each mechanism's smallest configurations replayed on the code: a pre-commit "
                            "hook), dev (fast Hypothesis), ci (the gate, the default), nightly (also the large "
                            "configurations and Hypothesis' full budget)")
    check.add_argument("--no-cache", action="store_true",
                       help="explore every model again instead of reusing the graphs kept from earlier runs of the "
                            "same model code (the reference is replayed either way)")
    check.add_argument("--depth", type=at_least(1), default=10, help="Z3 bounded-proof depth (default 10)")
    check.add_argument("--max-states", type=at_least(1), default=None,
                       help="bound each exploration to this many states (default: no bound; the row then says bounded)")
    check.add_argument("--out", default="brokerspec-out", help="where counterexample traces are written")
    check.add_argument("--junit", metavar="FILE", help="also write the table as JUnit XML")
    check.add_argument("--workers", type=at_least(1), default=min(2, os.cpu_count() or 1),
                       help="processes that share the check: the mechanisms, or one mechanism's conformance replay "
                            "(default: 2, or 1 on one core); the verdicts are the same for any number")
    check.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    check.add_argument("--fail-fast", action="store_true", help="stop at the first failing row")
    check.set_defaults(run=cmd_check)

    prove = sub.add_parser("prove", help="Z3 bounded proofs and k-induction, with their twins")
    common(prove)
    prove.add_argument("--depth", type=at_least(1), default=10, help="the BMC depth (default 10)")
    prove.set_defaults(run=cmd_prove)

    explore_p = sub.add_parser("explore", help="breadth-first exploration of one configuration")
    explore_p.add_argument("--mechanism", required=True, help=f"one of: {names}")
    explore_p.add_argument("--variant", type=name, help="the variant to explore (default: the current one)")
    explore_p.add_argument("--config", type=name, help="an explore configuration (default: the mechanism's first)")
    explore_p.add_argument("--max-states", type=at_least(1), default=None,
                           help="stop after this many distinct states (default: no bound)")
    explore_p.add_argument("--out", default="brokerspec-out",
                           help="where counterexample traces are written (default brokerspec-out)")
    explore_p.add_argument("--por", action="store_true",
                           help="partial-order reduction: where a thread's next step touches nothing another thread "
                                "may still touch, explore that step alone (models of threads that declare footprints, "
                                "such as Key_Shared's lock scope; the same verdicts and shortest traces)")
    explore_p.add_argument("--preemption-bound", type=at_least(0), default=None, metavar="K",
                           help="explore only the runs with at most K preemptions (switches away from a thread that "
                                "could go on), as CHESS does: complete only up to K (models of threads)")
    explore_p.add_argument("--symmetry", action="store_true",
                           help="one state per orbit of the model's symmetry, where its configuration declares one "
                                "(fewer states; the same verdicts and shortest counterexamples)")
    explore_p.add_argument("--workers", type=at_least(1), default=1,
                           help="processes that share each level of the search (default 1); the result is the same "
                                "for any number")
    explore_p.add_argument("--conformance", action="store_true",
                           help="then replay every transition of the configuration on the reference implementation, "
                                "as check does for the default gate's (e.g. a nightly configuration)")
    explore_p.set_defaults(run=cmd_explore)

    replay_p = sub.add_parser("replay", help="replay a trace against the model or the reference")
    replay_p.add_argument("trace")
    replay_p.add_argument("--against", choices=("model", "reference"), default="model",
                          help="replay on the model (default) or on the reference implementation beside it")
    replay_p.add_argument("--variant", type=name, help="replay the same actions on another variant")
    replay_p.add_argument("--step-timeout", type=seconds(MIN_STEP_TIMEOUT_S), default=5.0,
                          help="seconds a port may take per step")
    replay_p.add_argument("--jvm", metavar="CLASSPATH",
                          help="replay a JVM trace (verify --jvm's) on these classes or jars")
    replay_p.add_argument("--port", nargs=argparse.REMAINDER,
                          help="replay against this port instead (its argv; must come last)")
    replay_p.set_defaults(run=cmd_replay)

    shrink_p = sub.add_parser("shrink", help="delta-debug a failing trace to a shorter one")
    shrink_p.add_argument("trace")
    shrink_p.add_argument("-o", "--output", help="the shrunk trace (default: TRACE's name with .shrunk.json)")
    shrink_p.add_argument("--budget", type=seconds(), default=60.0,
                          help="with --port or --jvm: seconds for the whole shrink")
    shrink_p.add_argument("--step-timeout", type=seconds(MIN_STEP_TIMEOUT_S), default=5.0,
                          help="with --port: seconds a port may take per step")
    shrink_p.add_argument("--jvm", metavar="CLASSPATH",
                          help="shrink a JVM trace (verify --jvm's) on these classes or jars")
    shrink_p.add_argument("--port", nargs=argparse.REMAINDER,
                          help="shrink against this port, the oracle (its argv; must come last)")
    shrink_p.set_defaults(run=cmd_shrink)

    promote_p = sub.add_parser("promote", help="write a pytest regression test replaying a trace")
    promote_p.add_argument("trace")
    promote_p.add_argument("--tests-dir", default="tests/regressions",
                           help="where the test is written, inside or outside the repository (default "
                                "tests/regressions)")
    promote_p.add_argument("--name", help="the test's and the corpus trace's name (default: the trace's file name)")
    promote_p.add_argument("--corpus", default=str(CORPUS),
                           help="the corpus folder the trace is copied into (default: this checkout's traces/corpus)")
    promote_p.add_argument("--force", action="store_true", help="overwrite a test or corpus trace of the same name")
    promote_p.set_defaults(run=cmd_promote)

    report_p = sub.add_parser("report", help="draw a trace as an HTML/SVG timeline")
    report_p.add_argument("trace")
    report_p.add_argument("--out", help="the HTML file to write (default: the trace path with .html)")
    report_p.set_defaults(run=cmd_report)

    add_verify_parser(sub)

    protocol_p = sub.add_parser("protocol", help="print a mechanism's port vocabulary, generated from its model")
    protocol_p.add_argument("--mechanism", required=True, help=f"one of: {names}")
    protocol_p.add_argument("--variant", type=name,
                            help="the variant whose vocabulary to print (default: the current one)")
    protocol_p.add_argument("--config", type=name,
                            help="only this configuration (default: every explorer and Hypothesis one)")
    protocol_p.add_argument("--json", action="store_true", help="the vocabulary as one JSON document, for tools")
    protocol_p.set_defaults(run=cmd_protocol)

    invariants_p = sub.add_parser("invariants", help="every invariant: its statement, the engines and configurations "
                                                     "that judge it and what must break it, from the bindings")
    invariants_p.add_argument("--mechanism", action="append", help=f"only this mechanism (repeatable): {names}")
    invariants_p.add_argument("--json", action="store_true", help="the catalogue as one JSON document, for tools")
    invariants_p.set_defaults(run=cmd_invariants)

    mutants_p = sub.add_parser("mutants", help="run check on each planted bug (tests/mutants/*.patch): killed by name?")
    mutants_p.add_argument("patch", nargs="*", help="mutant files (default: every one in --dir)")
    mutants_p.add_argument("--dir", default="tests/mutants", help="the folder of mutants (default tests/mutants)")
    mutants_p.add_argument("--mechanism", action="append", help="only this mechanism's mutants (repeatable)")
    mutants_p.add_argument("--timeout", type=float, default=600.0, help="seconds a check may take (default 600)")
    mutants_p.set_defaults(run=cmd_mutants)

    simulate_p = sub.add_parser("simulate", help="write a large event log by random walks over a model")
    simulate_p.add_argument("--mechanism", required=True, help="the mechanism whose log to write")
    simulate_p.add_argument("--events", type=int, required=True, help="valid events to write")
    simulate_p.add_argument("--fault", help="a known-bad variant injected into three partitions")
    simulate_p.add_argument("--partitions", type=int, default=1000, help="independent partitions (default 1000)")
    simulate_p.add_argument("--corrupt", type=float, default=0.0, help="fraction of malformed lines to add")
    simulate_p.add_argument("--seed", type=int, default=0,
                            help="seed of the random walks (default 0; the same seed, the same log)")
    simulate_p.add_argument("--out", required=True, help="a .jsonl (JSON lines) or .parquet path")
    simulate_p.set_defaults(run=cmd_simulate)

    pipeline_p = sub.add_parser("pipeline", help="check event logs with Spark")
    pipeline_sub = pipeline_p.add_subparsers(dest="pipeline_command", metavar="{check,explore}", parser_class=Parser)

    def pipeline_usage(args: argparse.Namespace) -> int:
        """`brokerspec pipeline` alone: which subcommands there are and what each does, in one line."""
        choices = "; ".join(f"{a.dest} ({a.help})" for a in pipeline_sub._choices_actions)
        raise UsageError(f"pipeline: name a subcommand: {choices}; see brokerspec pipeline SUBCOMMAND --help")

    pipeline_p.set_defaults(run=pipeline_usage)
    pcheck = pipeline_sub.add_parser("check", help="quarantine, SQL window checks and model replay of a log")
    pcheck.add_argument("--mechanism", required=True, help="the mechanism that wrote the log")
    pcheck.add_argument("--input", required=True, help="a JSON-lines or Parquet log")
    pcheck.add_argument("--out", required=True, help="directory for violations, traces and summary.json")
    pcheck.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    pcheck.add_argument("--json", action="store_true",
                        help="print the summary as JSON (and no progress lines) instead of the text report")
    pcheck.add_argument("--conformance", action="store_true",
                        help="a broker event log (Key_Shared's): replay every partition through the current model as "
                             "well (slower), so a log that behaves differently from it fails even where the fast "
                             "path's invariants hold")
    pcheck.set_defaults(run=cmd_pipeline_check)

    pexplore = pipeline_sub.add_parser("explore", help="swarm random walks over many seeds in Spark tasks")
    pexplore.add_argument("--mechanism", required=True, help=f"one of: {names}")
    pexplore.add_argument("--variant", type=name, help="walk this variant (default: the current one)")
    pexplore.add_argument("--seeds", type=int, required=True, help="number of seeds (one walk each)")
    pexplore.add_argument("--seed", type=int, default=0, help="first seed")
    pexplore.add_argument("--steps", type=int, default=60, help="steps per walk")
    pexplore.add_argument("--out", default="brokerspec-out", help="where shrunk traces are written")
    pexplore.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    pexplore.set_defaults(run=cmd_pipeline_explore)

    bench_p = sub.add_parser("bench", help="explorer states/s, stateful steps/s, time to find known bugs")
    common(bench_p)
    bench_p.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    bench_p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    bench_p.add_argument("--gate", action="store_true",
                         help="the default check's wall and CPU time per mechanism and engine, with an empty graph "
                              "cache and a warm one, and which engine kills each planted bug first, and when")
    bench_p.add_argument("--pipeline", nargs="?", type=int, const=10_000_000, metavar="EVENTS",
                         help="measure the Spark pipeline instead, on a log of EVENTS events (default 10,000,000) "
                              "of each --mechanism (default: every mechanism with an event log)")
    bench_p.add_argument("--out", default="brokerspec-out/bench",
                         help="folder for the Markdown pages and PNG plots (default brokerspec-out/bench)")
    bench_p.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        command = " ".join(argv if argv is not None else sys.argv[1:])[:200]
        print(f"interrupted: brokerspec {command}", file=sys.stderr)
        return INTERRUPTED
