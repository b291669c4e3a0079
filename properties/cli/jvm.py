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

from properties.cli.common import DIVERGED, INFRA, PASS, VIOLATED, UsageError, mechanisms
from properties.engines.port import jsonable
from properties.engines.protocol import hello_config
from properties.jvm.build import JvmSetupError
from properties.jvm.threads import LockLevelError
from properties.jvm.verify import (
    ADAPTERS,
    DEFAULT_PREEMPTIONS,
    GRANULARITY,
    adapter_for,
    classpath_entries,
    load_trace,
    replay_on_jvm,
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
    try:
        trace = load_trace(Path(args.trace))
        classpath = classpath_entries(args.jvm)
    except JvmSetupError as error:
        raise UsageError(f"replay: {error}") from None
    mechanism = mechanisms([trace.mechanism])[0]
    config = mechanism.explore_configs.get(trace.config)
    if config is None:
        raise UsageError(f"replay: {args.trace}: {trace.mechanism} has no configuration {trace.config!r}")
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
