"""One report for every checker: what a run of one engine on one configuration did and found.

Stateright's checkers share one report whatever they search with; so do ours. The explorer, the conformance
replay, the Hypothesis batches, the Z3 proofs and the Spark pipeline each end in a `CheckResult`, and `brokerspec
check` judges twins and known findings from results and renders its table, `--json` and JUnit from them, never
from an engine's own type. A result is plain values (its coverage a `Portable`), so it crosses a process
boundary as it is: a forked check streams results to the parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from properties.engines.coverage import Portable


@dataclass(frozen=True)
class Target:
    """The one finding a result names, with its trace: the twin's invariant where a twin's run found it, else the
    first failure. A field left None is one the engine does not say (it stays out of `--json`)."""

    name: str
    steps: int
    """The length of its (shrunk) trace; 0 where the run failed before any action."""
    trace: str | None = None
    """The saved trace's path."""
    statement: str | None = None
    """The property's one-sentence statement (`Mechanism.statement`; "" for a name without one)."""
    harness_defect: str | None = None
    """Where no invariant named a divergence: what that says about the harness (`Mechanism.unnamed_divergence`)."""
    reproduce: str | None = None
    """The command that replays the saved trace to this finding, as the check prints it."""


@dataclass(frozen=True)
class CheckResult:
    """What one engine run did and found, before any verdict (the caller judges: the same failures are a bug on
    the current variant and a catch on a twin).

    `engine` is the checker (explorer, conformance, hypothesis, z3, pipeline...) and `config` what it ran on (an
    explore or Hypothesis configuration, a proof's system, a log); `subject` is what the result is about where
    it is not the variant (a proof's invariant, the names of a configuration's known findings).
    """

    mechanism: str
    engine: str
    config: str
    variant: str
    subject: str = ""
    failures: tuple[str, ...] = ()
    """The property names the run found broken (a configuration's known findings left out, they have their own
    result)."""
    expected: str | None = None
    """The invariant the run must break: a twin's, or a proof's that must fail; None where every one must hold."""
    known: tuple[str, ...] = ()
    """Set on a result about a configuration's known findings: the names each of which must be found."""
    judged: bool = True
    """False for a twin's run where the current variant fails the same configuration: its failures say nothing
    (and are not reported)."""
    ran: bool = True
    """False where the engine did not run on this configuration (`detail` says why)."""
    target: Target | None = None
    work: Mapping[str, int] = field(default_factory=dict)
    """What the run did, in counts: states, transitions and depth; walks and steps; batches; records,
    partitions and quarantined lines..."""
    complete: bool = True
    """Whether the run covered all it set out to (False: a search or a replay cut by its budget)."""
    coverage: Portable | None = None
    """The actions taken and interesting states reached (runs of the current variant that record them)."""
    seconds: float | None = None
    """Wall seconds of the run (None for a verdict drawn from other runs, which has no time of its own)."""
    cpu_s: float = 0.0
    """CPU seconds of the process (and its reaped workers) for the run, measured by whoever runs it."""
    detail: str = ""
    """What the run did and found, in one line, as the check's table shows it."""

    @property
    def label(self) -> str:
        """The engine with its configuration, as the table's engine column shows it: `explorer[small]`."""
        return f"{self.engine}[{self.config}]" if self.config else self.engine

    @property
    def about(self) -> str:
        """The table's subject column: `subject`, else the variant."""
        return self.subject or self.variant

    def found(self) -> dict[str, object]:
        """The failure facts `--json` adds to the row (the mutants read `failures` and `target`): none where the
        result names no target, except on a known-findings result, which always says what it found."""
        out: dict[str, object] = {}
        if self.target is None and not self.known:
            return out
        out["failures"] = list(self.failures)
        if self.target is not None:
            out.update(target=self.target.name, steps=self.target.steps)
            optional = {"trace": self.target.trace, "statement": self.target.statement,
                        "harness_defect": self.target.harness_defect, "reproduce": self.target.reproduce}
            out.update({key: value for key, value in optional.items() if value is not None})
        return out
