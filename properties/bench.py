"""`brokerspec bench`: throughput of the engines and time-to-bug on the known-bad variants.

Speed goals live here, never in timed tests: the figures are measured in one run, on one
process, and reported as numbers (and ratios against the goals) for the issue notes.
"""

from __future__ import annotations

import time

from properties.explorer import explore
from properties.registry import Mechanism

EXPLORER_GOAL = 100_000  # distinct states per second
STATEFUL_GOAL = 2_000  # lockstep steps per second


def bench(mechanism: Mechanism, *, seconds: float, seed: int) -> dict[str, object]:
    """Measure one mechanism; every value is a plain number or string for the table and JSON."""
    from properties.cli import run_stateful  # the CLI owns the batching loop; import late to avoid a cycle

    out: dict[str, object] = {"mechanism": mechanism.name}
    runs = {
        name: explore(mechanism.make_model(config, mechanism.current), check_liveness=False, max_states=2_000_000)
        for name, config in mechanism.explore_configs.items()
    }
    name, result = max(runs.items(), key=lambda item: len(item[1].states))  # the largest space is the fairest rate
    model = mechanism.make_model(mechanism.explore_configs[name], mechanism.current)
    out["explorer_config"] = name
    out["explorer_states"] = len(result.states)
    out["explorer_states_per_s"] = round(result.states_per_second)
    out["explorer_vs_goal"] = round(result.states_per_second / EXPLORER_GOAL, 2)
    started = time.perf_counter()
    explore(model, check_liveness=True, max_states=2_000_000)
    out["explorer_with_liveness_s"] = round(time.perf_counter() - started, 2)
    first_config = next(iter(mechanism.hypothesis_configs.values()))
    run, _, steps, elapsed = run_stateful(mechanism, mechanism.current, first_config, seed, seconds, "ci")
    out["stateful_steps"] = steps
    out["stateful_steps_per_s"] = round(steps / elapsed) if elapsed else 0
    out["stateful_vs_goal"] = round(steps / elapsed / STATEFUL_GOAL, 2) if elapsed else 0
    out["stateful_current_passed"] = run is None
    for variant, invariant in mechanism.twins.items():
        for config_name, twin_config in mechanism.explore_configs.items():
            started = time.perf_counter()
            found = explore(mechanism.make_model(twin_config, variant), stop_on_violation=True, check_liveness=False)
            hit = [f for f in found.findings if f.name == invariant]
            key = f"time_to_{invariant}_{variant}_explorer[{config_name}]_s"
            out[key] = round(time.perf_counter() - started, 2) if hit else "not found"
        for config_name, config in mechanism.hypothesis_configs.items():
            run, _, _, elapsed = run_stateful(mechanism, variant, config, seed, 60.0, "ci")
            caught = run is not None and invariant in run.failures
            key = f"time_to_{invariant}_{variant}_hypothesis[{config_name}]_s"
            out[key] = round(elapsed, 2) if caught else "not found in 60s"
    if mechanism.bench is not None:
        out.update(mechanism.bench())
    return out
