"""`verify --jvm CLASSPATH` and `replay TRACE --jvm CLASSPATH`: the lock scopes on the user's own Java classes.

The work is `properties.jvm.verify`'s; this module reads the arguments, picks the configuration, prints the
verdict and the command that replays it. Exit codes as `verify`'s: 1 an invariant the adapter's ledger names, 2 a
granularity divergence from the lock model, or a replayed schedule that no longer fits the classes (a thread it
runs is blocked or done there), 3 a usage error (no
adapter for the configuration, a CLASSPATH entry that does not exist), 4 the JVM side failed (the agent or the
adapter does not compile, the JVM hung or crashed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models.core import Param
from properties.cli.common import DIVERGED, INFRA, PASS, VIOLATED, UsageError, mechanisms
from properties.engines.port import jsonable
from properties.engines.protocol import hello_config
from properties.jvm.build import JvmSetupError
from properties.jvm.threads import LockLevelError
from properties.jvm.verify import (
    ADAPTERS,
    DEFAULT_PREEMPTIONS,
    GRANULARITY,
    JvmTrace,
    adapter_for,
    classpath_entries,
    load_trace,
    model_config,
    replay_on_jvm,
    shrink_on_jvm,
    verify_on_jvm,
)


def cmd_verify_jvm(args: argparse.Namespace) -> int:
    """Every schedule of the configuration's adapter on CLASSPATH, within the preemption bound and the budget."""
    if args.port:
        raise UsageError("verify: --jvm and --port exclude each other (--jvm runs the project's adapter)")
    mechanism = mechanisms([args.mechanism])[0]
    variant = args.variant or mechanism.current
    name = args.config or next((c for m, c in sorted(ADAPTERS) if m == mechanism.name), "")
    try:
        adapter_for(mechanism.name, name)
        classpath = classpath_entries(args.jvm)
    except JvmSetupError as error:
        raise UsageError(f"verify: {error}") from None
    config = hello_config(mechanism, variant, mechanism.explore_configs[name])
    hello = {key: jsonable(value) for key, value in config.items()}
    preemptions = DEFAULT_PREEMPTIONS if args.preemptions is None else args.preemptions
    try:
        verdict = verify_on_jvm(mechanism.name, variant, name, hello, classpath,
                                lambda: mechanism.make_model(config, variant), preemptions, args.budget)
    except (JvmSetupError, LockLevelError) as error:
        print(f"{mechanism.name}/{variant}: jvm {name}: {error}")
        return INFRA
    found = verdict.exploration
    reach = "every schedule" if found.complete or found.violations else "cut by the budget"
    print(f"{mechanism.name}/{variant}: jvm {name}: {found.schedules} schedules, {found.steps} steps, at most "
          f"{preemptions} preemptions, {verdict.elapsed_s:.1f}s ({reach})")
    if verdict.trace is None:
        print(f"{mechanism.name}/{variant}: jvm {name}: no invariant violated")
        return PASS
    out = Path(args.out) / mechanism.name / f"{variant}-jvm-{name}-{verdict.trace.names[0]}.json"
    path = verdict.trace.save(out)
    print(f"{mechanism.name}/{variant}: jvm {name}: {', '.join(verdict.trace.names)} after "
          f"{len(verdict.trace.schedule)} steps{': ' + verdict.trace.detail if verdict.trace.detail else ''}")
    for point in verdict.trace.points:
        print(f"  {point}")
    print(f"  trace: {path}")
    print(f"  reproduce: brokerspec replay {path} --jvm {args.jvm}")
    return DIVERGED if verdict.trace.names == (GRANULARITY,) else VIOLATED


def cmd_replay_jvm(args: argparse.Namespace) -> int:
    """A JVM trace's schedule again, on a fresh JVM with CLASSPATH: the failure it records, or none."""
    trace, classpath, config = _opened(args, "replay")
    mechanism = mechanisms([trace.mechanism])[0]
    try:
        replayed, detail = replay_on_jvm(trace, classpath, lambda: mechanism.make_model(config, trace.variant))
    except (JvmSetupError, LockLevelError) as error:
        print(f"{args.trace}: {error}")
        return INFRA
    label = f"{trace.mechanism}/{trace.variant} {trace.config} on the JVM"
    if replayed.misfit:
        print(f"{args.trace}: the schedule does not fit these classes: {replayed.misfit} ({label})")
        return DIVERGED
    if not replayed.violations:
        print(f"{args.trace}: {replayed.steps} steps replayed on {label}: no invariant violated (the trace "
              f"recorded {', '.join(trace.names)})")
        return PASS
    print(f"{args.trace}: {', '.join(replayed.violations)} on {label} after {replayed.steps} of the trace's "
          f"{len(trace.schedule)} steps{': ' + detail if detail else ''}")
    return DIVERGED if replayed.violations == (GRANULARITY,) else VIOLATED


def _opened(args: argparse.Namespace, command: str) -> tuple[JvmTrace, tuple[Path, ...], dict[str, Param]]:
    """The JVM trace, CLASSPATH and the model's configuration (the trace's hello: a shrunk trace's scripts are its
    own), or a usage error naming what is wrong."""
    try:
        trace = load_trace(Path(args.trace))
        classpath = classpath_entries(args.jvm)
    except JvmSetupError as error:
        raise UsageError(f"{command}: {error}") from None
    try:
        adapter_for(trace.mechanism, trace.config)
        config = model_config(trace.hello)
        mechanisms([trace.mechanism])[0].make_model(config, trace.variant)
    except (JvmSetupError, ValueError) as error:
        raise UsageError(f"{command}: {args.trace}: {error}") from None
    return trace, classpath, config


def cmd_shrink_jvm(args: argparse.Namespace) -> int:
    """A JVM trace with fewer script operations that fails the same way on CLASSPATH (exit 0), or exit 2 when the
    trace does not fail on these classes (nothing to shrink toward)."""
    if args.port:
        raise UsageError("shrink: --jvm and --port exclude each other")
    trace, classpath, config = _opened(args, "shrink")
    mechanism = mechanisms([trace.mechanism])[0]
    source = Path(args.trace)
    out = Path(args.output) if args.output else source.with_name(source.name.removesuffix(".json") + ".shrunk.json")
    try:
        again, _ = replay_on_jvm(trace, classpath, lambda: mechanism.make_model(config, trace.variant))
        if again.violations[:1] != trace.names[:1]:
            print(f"{args.trace}: does not fail with {trace.names[0]} on these classes "
                  f"({', '.join(again.violations) or 'nothing violated'}): nothing to shrink toward")
            return DIVERGED
        shrunk = shrink_on_jvm(trace, classpath, lambda c: mechanism.make_model(c, trace.variant),
                               budget_s=args.budget)
    except (JvmSetupError, LockLevelError) as error:
        print(f"{args.trace}: {error}")
        return INFRA
    try:
        shrunk.trace.save(out)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write: {exc.strerror}") from None
    ops = sum(len(v) for v in trace.hello.values() if isinstance(v, list) and all(isinstance(x, str) for x in v))
    left = sum(len(v) for v in shrunk.trace.hello.values()
               if isinstance(v, list) and all(isinstance(x, str) for x in v))
    reach = "no operation can be dropped" if shrunk.complete else "cut by the budget"
    print(f"{args.trace}: {len(trace.schedule)} -> {len(shrunk.trace.schedule)} steps, {ops} -> {left} script "
          f"operations ({shrunk.candidates} candidates on the JVM, {reach}), still {trace.names[0]}: {out}")
    print(f"  reproduce: brokerspec replay {out} --jvm {args.jvm}")
    return PASS
