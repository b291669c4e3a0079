"""The port commands: `verify`, `replay --port` and `shrink --port` (docs/ports.md is the port author's guide).

Exit codes as every command's, and for a port: 1 an invariant the port reports itself, 2 a divergence
(from the model or the reference), 4 a misbehaving port (`port-<kind>`: it could not start, crashed,
hung, sent garbage, answered the wrong step, flooded, or sent an `error`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from models.core import Model, Param
from properties.cli.common import (
    DIVERGED,
    INFRA,
    PASS,
    VIOLATED,
    UsageError,
    make_model,
    mechanisms,
    name,
    progress,
    seconds,
)
from properties.cli.jvm import cmd_verify_jvm
from properties.engines.lockstep import DIVERGENCE
from properties.engines.mechanism import Mechanism
from properties.engines.verify import (
    PORT_PREFIX,
    TOUR_MAX_STEPS,
    Failure,
    PortPool,
    PortSpec,
    record_on_port,
    run_actions,
    shrink_failure,
    tour_on_port,
    verify,
)
from properties.registry import replay
from traces.format import Trace, TraceError, save

MODEL_ONLY_NOTE = "checked on the model only: the trace was recorded on a port, whose failure replays with --port ARGV"
"""What `replay` of a port's trace says without `--port`: the model passing it says nothing of the port."""


MIN_STEP_TIMEOUT_S = 0.001
"""The shortest `--step-timeout`: a port is given at least a millisecond to answer."""


def port_code(target: str) -> int:
    """A misbehaving port is infrastructure (4), a divergence 2, an invariant the port reports 1."""
    if target.startswith(PORT_PREFIX):
        return INFRA
    return DIVERGED if target == DIVERGENCE else VIOLATED


def recorded_on_port(trace: Trace) -> bool:
    """A trace `verify` (or `shrink --port`) wrote: its failure was the port's."""
    return trace.engine.split("+")[0] == "port"


def _port_argv(args: argparse.Namespace) -> tuple[str, ...]:
    if not args.port:
        raise UsageError(f"{args.command}: --port needs the port's command line (argv, last on the line)")
    return tuple(args.port)


def _port_config(mechanism: Mechanism, name: str | None) -> Mapping[str, Param]:
    configs = {**mechanism.explore_configs, **mechanism.hypothesis_configs}
    if name is None:
        return next(iter(mechanism.hypothesis_configs.values()))
    if name not in configs:
        raise UsageError(f"unknown config {name!r} for {mechanism.name} (known: {', '.join(configs)})")
    return configs[name]


def toured(mechanism: Mechanism, name: str, config: Mapping[str, Param], variant: str) -> list[str]:
    """Every explorer configuration of `config`'s scope, the one named `name` first: what the tour covers."""
    scope = mechanism.scope(mechanism.make_model(config, variant).config)
    names = [n for n in mechanism.explore_configs
             if mechanism.scope(mechanism.make_model(mechanism.explore_configs[n], variant).config) == scope]
    names.sort(key=lambda n: n != name)
    return names


def sent_by_verify(mechanism: Mechanism, name: str | None, variant: str) -> list[tuple[str, str]]:
    """(name, engine) of every configuration `verify --config NAME` sends a port in a hello, in order: the
    tour's explorer configurations, then NAME itself (`_port_config`'s choice: the Hypothesis one of that name,
    else the explorer one, which the tour has sent already)."""
    config = _port_config(mechanism, name)
    chosen = name or next(iter(mechanism.hypothesis_configs))
    sent = [(n, "explorer") for n in toured(mechanism, chosen, config, variant)]
    engine = "hypothesis" if chosen in mechanism.hypothesis_configs else "explorer"
    return [*sent, *([(chosen, engine)] if (chosen, engine) not in sent else [])]


def _tours(mechanism: Mechanism, name: str, config: Mapping[str, Param], variant: str,
           spec: PortSpec) -> list[tuple[str, Callable[[], Model[Any]], PortSpec]]:
    """The tour's configurations (`toured`), each with its model and port set-up."""
    out: list[tuple[str, Callable[[], Model[Any]], PortSpec]] = []
    for explored in toured(mechanism, name, config, variant):
        small = dict(mechanism.explore_configs[explored])
        out.append((explored, lambda small=small: mechanism.make_model(small, variant),  # type: ignore[misc]
                    replace(spec, config=small)))
    return out


def cmd_verify(args: argparse.Namespace) -> int:
    if args.jvm is not None:
        return cmd_verify_jvm(args)
    mechanism = mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    config = _port_config(mechanism, args.config)
    make_model(mechanism, config, variant)  # a usage error for an unknown variant
    spec = PortSpec(_port_argv(args), mechanism, variant, dict(config), args.step_timeout, mechanism.make_reference)
    name = args.config or next(iter(mechanism.hypothesis_configs))
    tours = _tours(mechanism, name, config, variant, spec)
    if args.tour_only and not tours:
        raise UsageError(f"verify --tour-only: {mechanism.name} has no explorer configuration of {name!r}'s scope")
    what = "the tour" if args.tour_only else "the tour, random walks and Hypothesis runs"
    progress(f"  verify {mechanism.name}/{variant} on {shlex.join(spec.argv)}: {what}, up to {args.budget:g}s")
    verdict = verify(lambda: mechanism.make_model(config, variant), spec, budget_s=args.budget, seed=args.seed,
                     tours=tours, tour_only=args.tour_only, progress=progress)
    label = f"{mechanism.name}/{variant}"
    for part in verdict.tour:
        print(f"{label}: tour {part.line()}")
    if not tours:
        print(f"{label}: tour: no explorer configuration of this scope (random walks and Hypothesis only)")
    found = verdict.failure
    path = None
    if found is not None:
        assert verdict.trace is not None
        path = save(verdict.trace, Path(args.out) / mechanism.name / f"{variant}-port-{found.target}.json")
    result = verdict.result(name, None if path is None else str(path))
    print(f"{label}: {result.detail}")
    if found is None or result.target is None:
        return PASS
    for note in verdict.notes:
        print(f"  note: {note}")
    print("  actions: " + "; ".join(str(a) for a in found.actions))
    print(f"  trace: {path}")
    print(f"  reproduce: brokerspec replay {path} --port {shlex.join(spec.argv)}")
    return port_code(result.target.name)


def replay_on_port(args: argparse.Namespace, trace: Trace) -> int:
    """`replay TRACE --port ARGV`: the trace's actions on a fresh port beside the model and the reference."""
    mechanism = mechanisms([trace.mechanism])[0]
    variant = args.variant or trace.variant
    try:
        replay(trace, args.trace, variant=variant, check_vars=False)  # the actions must fit the model
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    spec = PortSpec(_port_argv(args), mechanism, variant, trace.config, args.step_timeout, mechanism.make_reference)
    found = run_actions(lambda: make_model(mechanism, trace.config, variant), spec, trace.actions)
    label = f"{trace.mechanism}/{variant} against the port"
    if found is None:
        print(f"{args.trace}: {len(trace.actions)} steps replayed on {label}: no failure")
        return PASS
    print(f"{args.trace}: {found.where}: {found.target} on {label}. {found.detail}".rstrip())
    return port_code(found.target)


def shrink_on_port(args: argparse.Namespace, trace: Trace, target: str, out: Path) -> int:
    """`shrink TRACE --port ARGV`: delta-debug the trace with the port as the oracle, within `--budget`."""
    mechanism = mechanisms([trace.mechanism])[0]
    model = make_model(mechanism, trace.config, trace.variant)
    try:
        replay(trace, args.trace, check_vars=False)  # the actions must fit the model
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    spec = PortSpec(_port_argv(args), mechanism, trace.variant, trace.config, args.step_timeout,
                    mechanism.make_reference, deadline=time.monotonic() + args.budget)

    def fresh_model() -> Model[Any]:
        return mechanism.make_model(model.config, model.variant)

    detail = trace.failure.get("detail")
    found = Failure(trace.actions, target, detail if isinstance(detail, str) else "", "replay")
    shrunk = shrink_failure(fresh_model, spec, found)
    if shrunk is None:
        raise UsageError(f"{args.trace}: the trace no longer fails with {target} on the port")
    shrunk_trace = record_on_port(fresh_model(), spec, shrunk)
    save(replace(shrunk_trace, engine=f"{trace.engine.split('+')[0]}+shrink", seed=trace.seed), out)
    print(f"{args.trace}: {len(trace.actions)} -> {len(shrunk.actions)} steps on the port, still {target}: {out}")
    return PASS


def add_verify_parser(sub: Any) -> None:
    """The `verify` subcommand's arguments."""
    verify_p = sub.add_parser("verify", help="check a port (JSON lines on stdin/stdout) against the model")
    verify_p.add_argument("--mechanism", required=True, help="the mechanism the port implements")
    verify_p.add_argument("--variant", type=name, help="the variant the port implements (default: the current one)")
    verify_p.add_argument("--config", type=name,
                          help="configuration name (default: the first Hypothesis configuration)")
    verify_p.add_argument("--budget", type=seconds(), default=20.0,
                          help="seconds for everything, shrinking and the trace included (default 20)")
    verify_p.add_argument("--tour-only", action="store_true",
                          help=f"only the tour: every transition of each explorer configuration of the scope (up to "
                               f"{TOUR_MAX_STEPS} steps each), no random walks or Hypothesis runs (for CI)")
    verify_p.add_argument("--seed", type=int, default=0,
                          help="seed of the random walks and Hypothesis runs (default 0; the same seed, the same runs)")
    verify_p.add_argument("--step-timeout", type=seconds(MIN_STEP_TIMEOUT_S), default=5.0,
                          help="seconds a port may take per step")
    verify_p.add_argument("--out", default="brokerspec-out", help="where the counterexample trace is written")
    verify_p.add_argument("--jvm", metavar="CLASSPATH",
                          help="instead of a port: run the configuration's JVM adapter on these classes or jars "
                               "(the user's build), every schedule within --preemptions (README: Check your own "
                               "Pulsar build)")
    verify_p.add_argument("--preemptions", type=int, help="with --jvm: the preemption bound (default 2)")
    verify_p.add_argument("--port", nargs=argparse.REMAINDER,
                          help="the port's argv (no shell); must come last on the line")
    verify_p.set_defaults(run=cmd_verify)


PORT_TOUR_GOAL_S = 20.0
"""Issue 35's goal: a bundled port (the Node port of the Key_Shared tracker scope) tours its configuration within
this, on one core."""
ROOT = Path(__file__).resolve().parents[2]


def bench_port_tour(mechanism: Mechanism) -> dict[str, object]:
    """The tour of the mechanism's bundled port (if it has one) over its explore configuration, harness and port
    pinned to one core together (the goal's terms)."""
    bundled = mechanism.bundled_port
    if bundled is None:
        return {}
    figure = f"port_tour_{bundled.name}"
    program, script = shutil.which(bundled.program), ROOT / bundled.script
    if program is None or not script.is_file():
        return {figure: f"not run: needs {bundled.program} and {bundled.script}"}
    config = dict(mechanism.explore_configs[bundled.config])
    spec = PortSpec((program, str(script)), mechanism, mechanism.current, config)
    pool = PortPool(spec)
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # the port inherits it: both share one core
    try:
        part, failure = tour_on_port(bundled.config, lambda: mechanism.make_model(config, mechanism.current), spec,
                                     pool, stop_at=time.monotonic() + 10 * PORT_TOUR_GOAL_S)
    finally:
        pool.close()
        os.sched_setaffinity(0, cores)
    return {
        f"{figure}_s": round(part.elapsed_s, 2),
        f"{figure}_covered": f"{part.covered} of {part.transitions} transitions, {part.steps} steps",
        f"{figure}_steps_per_s": round(part.steps / part.elapsed_s) if part.elapsed_s else 0,
        f"{figure}_vs_goal": round(PORT_TOUR_GOAL_S / part.elapsed_s, 2) if part.elapsed_s else 0,
        f"{figure}_failure": "none" if failure is None else f"{failure.target}: {failure.detail}",
    }
