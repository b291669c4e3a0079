"""The `brokerspec` command line.

Exit codes: 0 pass, 1 invariant violated (or a known-bad variant not caught), 2 divergence from a
port, 3 usage or input error, 4 infrastructure failure. Every failure prints the command that
reproduces it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hypothesis import seed as hypothesis_seed

from models.core import Model, Param
from properties import profiles, registry
from properties.explorer import Exploration, explore
from properties.lockstep import DIVERGENCE, Lockstep
from properties.registry import Mechanism
from properties.stateful import FailedRun, build_state_machine, find_failure
from traces.format import Trace, TraceError, load, save
from traces.promote import promote
from traces.replay import record, replay
from traces.shrink import failure_oracle, shrink

PASS, VIOLATED, DIVERGED, USAGE, INFRA = 0, 1, 2, 3, 4


class UsageError(Exception):
    """Bad arguments or input: one line, exit code 3."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)


def _mechanisms(names: Sequence[str] | None) -> list[Mechanism]:
    known = registry.mechanisms()
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown mechanism {unknown[0]!r} (known: {', '.join(known)})")
    return [known[n] for n in names]


def _model(mechanism: Mechanism, config: Any, variant: str) -> Model[Any]:
    if variant not in mechanism.variants:
        raise UsageError(f"unknown variant {variant!r} for {mechanism.name} (known: {', '.join(mechanism.variants)})")
    return mechanism.make_model(config, variant)


def _save_finding(
    out: Path, mechanism: Mechanism, model: Model[Any], actions: Sequence[Any], engine: str, seed: int | None,
    name: str | None = None,
) -> Path:
    """Record the run (in lockstep with the reference) and save it; `engine` and the finding name the file.

    A liveness or deadlock path breaks no invariant at its last state, so `name` labels the file.
    """
    implementation = mechanism.make_reference(model.config, model.variant) if mechanism.make_reference else None
    trace = record(model, actions, engine=engine.split("[")[0], seed=seed, implementation=implementation)
    names = "-".join(str(n) for n in trace.failure.get("names", [])) or name or "run"  # type: ignore[union-attr]
    label = engine.replace("[", "-").replace("]", "")
    return save(trace, out / mechanism.name / f"{model.variant}-{label}-{names}.json")


def run_explorer(mechanism: Mechanism, variant: str, config_name: str, max_states: int | None) -> Exploration[Any]:
    model = _model(mechanism, mechanism.explore_configs[config_name], variant)
    _progress(f"  explore {mechanism.name}/{variant}/{config_name}")

    def report(done: int, seen: int) -> None:
        _progress(f"  explore {mechanism.name}/{variant}/{config_name}: {done} expanded, {seen} seen")

    return explore(model, max_states=max_states, progress=report, terminal_ok=getattr(model, "terminal_ok", None))


def run_stateful(
    mechanism: Mechanism, variant: str, config: Mapping[str, Param], seed: int, budget_s: float, profile: str
) -> tuple[FailedRun | None, int, int, float]:
    """Hypothesis lockstep batches (seed, seed+1, ...) until a failure or the budget; (run, batches, steps, s)."""
    settings = profiles.use(profile)
    found: list[FailedRun] = []
    steps = [0]

    def count(_: Any) -> None:
        steps[0] += 1

    make_reference = mechanism.make_reference
    machine = build_state_machine(
        lambda: mechanism.make_model(config, variant),
        mechanism.make_model(config, variant).action_names,
        (lambda: make_reference(config, variant)) if make_reference is not None else None,
        on_failure=found.append,
        on_step=count,
    )
    started = time.perf_counter()
    batches = 0
    while True:
        error = find_failure(hypothesis_seed(seed + batches)(machine), settings)
        batches += 1
        if error is not None:
            run = found[-1] if found else FailedRun((), ("exception",), f"{type(error).__name__}: {error}")
            return run, batches, steps[0], time.perf_counter() - started
        if time.perf_counter() - started >= budget_s:
            return None, batches, steps[0], time.perf_counter() - started


def _shrunk(mechanism: Mechanism, model: Model[Any], actions: Sequence[Any], target: str) -> tuple[Any, ...]:
    def make() -> Lockstep[Any]:
        implementation = mechanism.make_reference(model.config, model.variant) if mechanism.make_reference else None
        return Lockstep(mechanism.make_model(model.config, model.variant), implementation)

    return shrink(actions, failure_oracle(make, target))


@dataclass
class _Report:
    """The check's table and exit code; twins are judged per engine over all configurations."""

    rows: list[list[str]] = field(default_factory=list)
    worst: int = PASS

    def add(self, row: list[str], code: int) -> None:
        self.rows.append(row)
        self.worst = max(self.worst, code)


def _check_explorer(args: argparse.Namespace, mechanism: Mechanism, variant: str, report: _Report) -> bool:
    expected = mechanism.twins.get(variant)
    caught = False
    for config_name, config in mechanism.explore_configs.items():
        result = run_explorer(mechanism, variant, config_name, args.max_states)
        names = [f.name for f in result.findings]
        detail = f"{len(result.states)} states, {result.transitions} transitions, depth {result.max_depth}"
        if not result.complete:
            detail += " (bounded)"
        verdict, code = _verdict(names, expected)
        caught = caught or (expected is not None and expected in names)
        if result.findings and (expected is None or expected in names):
            finding = next(f for f in result.findings if expected is None or f.name == expected)
            model = _model(mechanism, config, variant)
            path = _save_finding(Path(args.out), mechanism, model, finding.path, f"explorer[{config_name}]", None,
                                 finding.name)
            detail += f"; {finding.kind} {finding.name} in {len(finding.path)} steps ({finding.detail}): {path}"
            if code:
                _progress(f"reproduce: brokerspec replay {path}")
        report.add([mechanism.name, f"explorer[{config_name}]", variant, verdict, detail, f"{result.elapsed_s:.1f}s"],
                   code if expected is None else PASS)
    return caught


def _check_hypothesis(args: argparse.Namespace, mechanism: Mechanism, variant: str, report: _Report) -> bool:
    expected = mechanism.twins.get(variant)
    for config_name, config in mechanism.hypothesis_configs.items():
        _progress(f"  hypothesis {mechanism.name}/{variant}/{config_name}: up to {args.budget:g}s, {args.profile}")
        run, batches, steps, elapsed = run_stateful(mechanism, variant, config, args.seed, args.budget, args.profile)
        names = list(run.failures) if run else []
        verdict, code = _verdict(names, expected)
        detail = f"{steps} steps in {batches} batch(es) from seed {args.seed}"
        if run is not None and run.actions:
            model = _model(mechanism, config, variant)
            target = expected if expected in run.failures else run.failures[0]
            actions = _shrunk(mechanism, model, run.actions, target)
            path = _save_finding(Path(args.out), mechanism, model, actions, f"hypothesis[{config_name}]", args.seed)
            detail += f"; {target} in {len(actions)} steps: {path}"
            if code:
                _progress(f"reproduce: brokerspec replay {path}")
        elif run is not None:
            detail += f"; {run.detail}"
        report.add([mechanism.name, f"hypothesis[{config_name}]", variant, verdict, detail, f"{elapsed:.1f}s"],
                   code if expected is None else PASS)
        if expected is not None and expected in names:
            return True  # the twin is caught; the remaining configurations add nothing
    return False


def cmd_check(args: argparse.Namespace) -> int:
    report = _Report()
    for mechanism in _mechanisms(args.mechanism):
        variants = [args.variant] if args.variant else list(mechanism.variants)
        for variant in variants:
            _model(mechanism, None, variant)
            expected = mechanism.twins.get(variant)
            for engine, check in (("explorer", _check_explorer), ("hypothesis", _check_hypothesis)):
                if not check(args, mechanism, variant, report) and expected is not None:
                    report.add([mechanism.name, engine, variant, f"TWIN MISSED ({expected})",
                                "no configuration of this engine caught the known bug", ""], VIOLATED)
        if mechanism.proofs is not None and not args.variant:
            _progress(f"  z3 {mechanism.name}: depth {args.depth}")
            for proof, must_hold in mechanism.proofs(args.depth):
                ok = proof.holds == must_hold
                verdict = ("proved" if proof.holds else "twin caught") if ok else (
                    "PROOF FAILED" if must_hold else "TWIN MISSED")
                report.add([mechanism.name, f"z3[{proof.system}]", proof.invariant, verdict, proof.summary(),
                            f"{proof.elapsed_s:.1f}s"], PASS if ok else VIOLATED)
    if not report.rows:
        raise UsageError("no mechanism to check")
    print(_table(report.rows, ["mechanism", "engine", "variant/invariant", "verdict", "detail", "time"]))
    print(f"\nbrokerspec check: {'PASS' if report.worst == PASS else 'FAIL'}")
    return report.worst


def _verdict(found: Sequence[str], expected: str | None) -> tuple[str, int]:
    """Current variants must pass; a known-bad variant must be caught on its invariant."""
    if expected is None:
        if not found:
            return "pass", PASS
        return f"VIOLATED {','.join(found)}", DIVERGED if found == [DIVERGENCE] else VIOLATED
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
    print(_table(rows, ["mechanism", "system", "invariant", "role", "result", "time"]))
    return worst


def cmd_explore(args: argparse.Namespace) -> int:
    mechanism = _mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    if args.config not in mechanism.explore_configs:
        raise UsageError(f"unknown config {args.config!r} (known: {', '.join(mechanism.explore_configs)})")
    result = run_explorer(mechanism, variant, args.config, args.max_states)
    print(f"{mechanism.name}/{variant}/{args.config}: {len(result.states)} states, {result.transitions} transitions, "
          f"depth {result.max_depth}, {'complete' if result.complete else 'bounded'}, "
          f"{result.states_per_second:,.0f} states/s")
    print("coverage: " + ", ".join(f"{k}={v}" for k, v in sorted(result.coverage.items())))
    model = _model(mechanism, mechanism.explore_configs[args.config], variant)
    for finding in result.findings:
        path = _save_finding(
            Path(args.out), mechanism, model, finding.path, f"explorer[{args.config}]", None, finding.name
        )
        print(f"{finding.kind} {finding.name}: {len(finding.path)} steps -> {path}")
        print(f"  {finding.detail}")
        print(f"  reproduce: brokerspec replay {path}")
    return VIOLATED if result.findings else PASS


def _load(path: str) -> Trace:
    try:
        return load(Path(path))
    except TraceError as exc:
        raise UsageError(str(exc)) from None


def cmd_replay(args: argparse.Namespace) -> int:
    trace = _load(args.trace)
    try:
        result = replay(trace, args.trace, against=args.against, variant=args.variant)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    label = f"{trace.mechanism}/{args.variant or trace.variant} against the {args.against}"
    if result.ok:
        print(f"{args.trace}: {result.steps} states replayed on {label}: no invariant violated")
        return PASS
    print(f"{args.trace}: step {result.step}: {', '.join(result.failures)} on {label}. {result.detail}".rstrip())
    return DIVERGED if result.failures == (DIVERGENCE,) else VIOLATED


def cmd_shrink(args: argparse.Namespace) -> int:
    trace = _load(args.trace)
    names = trace.failure.get("names")
    if not isinstance(names, list) or not names:
        raise UsageError(f"{args.trace}: the trace records no failure to shrink toward")
    mechanism = _mechanisms([trace.mechanism])[0]
    model = _model(mechanism, trace.config, trace.variant)
    target = str(names[0])
    try:
        actions = _shrunk(mechanism, model, trace.actions, target)
    except ValueError:
        raise UsageError(f"{args.trace}: the trace no longer fails with {target}") from None
    out = Path(args.output or args.trace.replace(".json", ".shrunk.json"))
    implementation = mechanism.make_reference(model.config, model.variant) if mechanism.make_reference else None
    save(record(model, actions, engine=f"{trace.engine}+shrink", seed=trace.seed, implementation=implementation), out)
    print(f"{args.trace}: {len(trace.actions)} -> {len(actions)} steps, still {target}: {out}")
    return PASS


def cmd_promote(args: argparse.Namespace) -> int:
    try:
        test_path = promote(Path(args.trace), Path(args.tests_dir), args.name)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {test_path}")
    return PASS


def cmd_bench(args: argparse.Namespace) -> int:
    from properties.bench import bench

    results = [bench(m, seconds=args.seconds, seed=args.seed) for m in _mechanisms(args.mechanism)]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        rows = [[str(r["mechanism"]), k, str(v)] for r in results for k, v in r.items() if k != "mechanism"]
        print(_table(rows, ["mechanism", "measure", "value"]))
    return PASS


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="brokerspec", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser, many: bool = True) -> None:
        if many:
            p.add_argument("--mechanism", action="append", help="limit to this mechanism (repeatable)")
        p.add_argument("--seed", type=int, default=0, help="seed for Hypothesis (default 0)")

    check = sub.add_parser("check", help="every engine on every mechanism, with a summary table")
    common(check)
    check.add_argument("--variant", help="only this variant (default: current and its known-bad twins)")
    check.add_argument("--budget", type=float, default=10.0, help="seconds of Hypothesis search per variant")
    check.add_argument("--profile", default="ci", choices=profiles.PROFILES)
    check.add_argument("--depth", type=int, default=10, help="Z3 bounded-proof depth")
    check.add_argument("--max-states", type=int, default=None)
    check.add_argument("--out", default="brokerspec-out", help="where counterexample traces are written")
    check.set_defaults(run=cmd_check)

    prove = sub.add_parser("prove", help="Z3 bounded proofs and k-induction, with their twins")
    common(prove)
    prove.add_argument("--depth", type=int, default=10)
    prove.set_defaults(run=cmd_prove)

    explore_p = sub.add_parser("explore", help="breadth-first exploration of one configuration")
    explore_p.add_argument("--mechanism", required=True)
    explore_p.add_argument("--variant")
    explore_p.add_argument("--config", default="small")
    explore_p.add_argument("--max-states", type=int, default=None)
    explore_p.add_argument("--out", default="brokerspec-out")
    explore_p.set_defaults(run=cmd_explore)

    replay_p = sub.add_parser("replay", help="replay a trace against the model or the reference")
    replay_p.add_argument("trace")
    replay_p.add_argument("--against", choices=("model", "reference"), default="model")
    replay_p.add_argument("--variant", help="replay the same actions on another variant")
    replay_p.set_defaults(run=cmd_replay)

    shrink_p = sub.add_parser("shrink", help="delta-debug a failing trace to a shorter one")
    shrink_p.add_argument("trace")
    shrink_p.add_argument("-o", "--output")
    shrink_p.set_defaults(run=cmd_shrink)

    promote_p = sub.add_parser("promote", help="write a pytest regression test replaying a trace")
    promote_p.add_argument("trace")
    promote_p.add_argument("--tests-dir", default="tests/regressions")
    promote_p.add_argument("--name")
    promote_p.set_defaults(run=cmd_promote)

    bench_p = sub.add_parser("bench", help="explorer states/s, stateful steps/s, time to find known bugs")
    common(bench_p)
    bench_p.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    bench_p.add_argument("--json", action="store_true")
    bench_p.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return INFRA


if __name__ == "__main__":
    sys.exit(main())
