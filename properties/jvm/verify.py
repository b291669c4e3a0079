"""`brokerspec verify --jvm CLASSPATH`: a lock configuration's threads on the user's own classes, every schedule.

An adapter (`jvm/adapters/<name>/`, Java written against upstream's public API and shipped with the project) is a
`brokerspec.jvm.Scenario`: it builds upstream's objects for the configuration the hello carries and runs each
thread's script through them, in the order upstream's callers use them; its ledger names the scope's invariants
in `vars.broken`. It is compiled here against CLASSPATH (the user's build, or the project's stand-ins in the tests),
the agent rewrites the packages it names, and `explore` runs its schedules under a preemption bound. A failing
schedule is saved as a JVM trace (`JvmTrace`: the hello, the schedule, the point each step ran) that
`brokerspec replay TRACE --jvm CLASSPATH` runs again on the JVM and `brokerspec shrink TRACE --jvm CLASSPATH` shortens
(fewer script operations, the same failure).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.core import Action, Json, Model, Param
from properties.jvm.build import JvmSetupError, compile_java, controller_jar, java_command
from properties.jvm.explore import Exploration, Replayed, explore, replay
from properties.jvm.threads import LockLevelPort, Snapshot

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "jvm" / "adapters"
TRACE_SCHEMA = 1
DEFAULT_PREEMPTIONS = 2
"""CHESS's observation, and the lock scope's: its known races (LK-6) need one preemption; two cover a second."""
UNCAUGHT = "uncaught"
GRANULARITY = "granularity"
"""A point the real code has and the lock model lacks, or the reverse (`Lockstep`)."""


@dataclass(frozen=True)
class Adapter:
    """The Java scenario of one lock configuration: its class, its sources' folder and the packages to rewrite."""

    scenario: str
    sources: str
    packages: tuple[str, ...]


SEMAPHORE = Adapter("org.apache.pulsar.common.semaphore.BrokerspecSemaphoreLocks", "topiclist",
                    ("org.apache.pulsar.common.semaphore",))
TRACKER = Adapter("org.apache.pulsar.broker.service.BrokerspecKeySharedLocks", "keyshared",
                  ("org.apache.pulsar.broker.service",))
ADAPTERS: dict[tuple[str, str], Adapter] = {
    ("keyshared", "locks"): TRACKER,
    ("keyshared", "locks-fix"): TRACKER,
    ("keyshared", "locks-pre23854"): TRACKER,
    **{("topiclist", name): SEMAPHORE for name in ("semaphore-locks", "semaphore-locks-cancel",
                                                   "semaphore-locks-grant")},
}
"""The configurations `verify --jvm` runs, by (mechanism, configuration name): their scripts, and the order of the
model an adapter that reports the model's labels is stepped beside (`locks`: the current tracker, `locks-fix`: the
fixed one, `locks-pre23854`: the one before apache/pulsar#23854). On the JVM the code is whatever CLASSPATH
holds: beside a model of another order it diverges in granularity."""


def adapter_for(mechanism: str, config: str) -> Adapter:
    """The adapter of a configuration, or a JvmSetupError naming the ones there are."""
    found = ADAPTERS.get((mechanism, config))
    if found is None:
        known = ", ".join(f"--mechanism {m} --config {c}" for m, c in sorted(ADAPTERS))
        raise JvmSetupError(f"verify --jvm has no adapter for {mechanism} --config {config} (it has: {known})")
    return found


def classpath_entries(classpath: str) -> tuple[Path, ...]:
    """CLASSPATH (entries separated as java's -cp separates them) as paths, or a JvmSetupError naming one missing."""
    entries = tuple(Path(p) for p in classpath.split(os.pathsep) if p)
    missing = [str(p) for p in entries if not p.exists()]
    if not entries or missing:
        raise JvmSetupError(f"--jvm CLASSPATH: {', '.join(missing) or 'empty'}: no such file or folder")
    return entries


def judge(snap: Snapshot, _thread: str | None = None) -> list[str]:
    """What the adapter's ledger names (`vars.broken`), and an exception that escaped a thread (`uncaught`)."""
    broken = snap.vars.get("broken", [])
    found = [str(name) for name in broken] if isinstance(broken, list) else []
    if any(t.uncaught for t in snap.threads) and not found:
        found.append(UNCAUGHT)
    return found


def _labels(threads: Json | None) -> dict[str, str]:
    """`[[thread, label], ...]` as a mapping (what is not such a pair is left out)."""
    pairs = threads if isinstance(threads, list) else []
    return {str(p[0]): str(p[1]) for p in pairs if isinstance(p, list) and len(p) == 2}


class Lockstep:
    """The lock model stepped beside the JVM: an adapter that reports its threads' points as the model labels them
    (`vars.threads`, the model's variable of that name) is a granularity divergence wherever the labels differ, or
    where a thread runs from a label the model does not offer (a point the real code has and the model lacks, or
    the reverse). The ledger's verdicts (`judge`) come first; `detail` says what diverged."""

    def __init__(self, make_model: Callable[[], Model[Any]]) -> None:
        self.model = make_model()
        self.state: Any = None
        self.labels: dict[str, str] = {}
        self.detail = ""

    def __call__(self, snap: Snapshot, thread: str | None) -> list[str]:
        found = judge(snap)
        reported = snap.vars.get("threads")
        if found or not isinstance(reported, list):
            return found
        if thread is None:
            self.state = self.model.initial()
        else:
            action = Action.of(thread, step=self.labels.get(thread, ""))
            if action not in self.model.enabled(self.state):
                offered = [str(a["step"]) for a in self.model.enabled(self.state) if a.name == thread]
                return self._diverged(f"{thread} ran from {self.labels.get(thread)!r}, which the model does not offer "
                                      f"here (it offers {offered or 'nothing'} for {thread})")
            self.state, _ = self.model.step(self.state, action)
        ours = _labels(reported)
        expected = _labels(self.model.vars(self.state).get("threads"))
        self.labels = ours
        wrong = [f"{name}: the JVM is at {ours.get(name)!r}, the model at {label!r}"
                 for name, label in expected.items() if ours.get(name) != label]
        return self._diverged("; ".join(wrong)) if wrong else []

    def _diverged(self, detail: str) -> list[str]:
        self.detail = detail
        return [GRANULARITY]


def _fingerprint(paths: Sequence[Path]) -> str:
    """What the adapter's compilation depends on: every file under `paths` by name, size and modification time
    (a rebuilt class or jar changes it), in order."""
    digest = hashlib.sha256()
    for root in paths:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file():
                stat = path.stat()
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:20]


def compiled_adapter(adapter: Adapter, classpath: Sequence[Path]) -> Path:
    """The adapter's classes compiled against the controller and `classpath`, kept in the cache folder by a digest
    of its sources and of the classpath's files (so a rebuilt user's build compiles it again)."""
    jar = controller_jar()
    sources = sorted((ADAPTERS_DIR / adapter.sources).rglob("*.java"))
    folder = jar.parent.parent / "adapters" / _fingerprint([jar, *sources, *classpath])
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch:
        out = Path(scratch) / "classes"
        compile_java(sources, out, [jar, *classpath])
        try:
            out.rename(folder)
        except OSError:  # another process compiled the same meanwhile
            if not folder.is_dir():
                raise
    return folder


@contextmanager
def running(adapter: Adapter, classpath: Sequence[Path], hello: dict[str, Json]) -> Iterator[LockLevelPort]:
    """The adapter compiled against `classpath` and started on a JVM with the agent, greeted with `hello`."""
    classes = compiled_adapter(adapter, classpath)
    argv = java_command([classes, *classpath], adapter.packages, "brokerspec.jvm.Driver", adapter.scenario)
    with LockLevelPort(argv, hello) as port:
        yield port


@dataclass(frozen=True)
class JvmTrace:
    """A failing schedule and where it came from: enough to run it again on the JVM (`replay --jvm`)."""

    mechanism: str
    variant: str
    config: str
    hello: dict[str, Json]
    schedule: tuple[str, ...]
    names: tuple[str, ...]
    points: tuple[str, ...] = ()
    """Per step, the thread and the point it ran from (for the reader; replay does not need them)."""
    detail: str = ""
    """What diverged, for a granularity divergence."""

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {"brokerspec-jvm": TRACE_SCHEMA, "mechanism": self.mechanism, "variant": self.variant,
                    "config": self.config, "hello": self.hello, "schedule": list(self.schedule),
                    "failure": {"step": len(self.schedule), "names": list(self.names), "detail": self.detail},
                    "points": list(self.points)}
        path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        return path


def is_jvm_trace(path: Path) -> bool:
    """Whether the file is a JVM trace (a JSON object with the `brokerspec-jvm` key), not an ITF trace."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "brokerspec-jvm" in document


def load_trace(path: Path) -> JvmTrace:
    """A JVM trace, or a JvmSetupError naming the file and what is wrong."""
    try:
        document: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise JvmSetupError(f"{path}: not a readable JSON file ({error})") from None
    if not isinstance(document, dict) or document.get("brokerspec-jvm") != TRACE_SCHEMA:
        raise JvmSetupError(f"{path}: not a JVM trace of schema {TRACE_SCHEMA} (key brokerspec-jvm)")
    schedule, failure = document.get("schedule"), document.get("failure")
    if not isinstance(schedule, list) or not all(isinstance(t, str) for t in schedule):
        raise JvmSetupError(f"{path}: schedule must be a list of thread names")
    if not isinstance(failure, dict) or not isinstance(failure.get("names"), list):
        raise JvmSetupError(f"{path}: failure must hold the names it broke")
    for key in ("mechanism", "variant", "config"):
        if not isinstance(document.get(key), str):
            raise JvmSetupError(f"{path}: {key} must be a string")
    if not isinstance(document.get("hello"), dict):
        raise JvmSetupError(f"{path}: hello must be the configuration object")
    return JvmTrace(document["mechanism"], document["variant"], document["config"], document["hello"],
                    tuple(schedule), tuple(str(n) for n in failure["names"]), tuple(document.get("points", ())),
                    str(failure.get("detail", "")))


@dataclass(frozen=True)
class JvmVerdict:
    """The exploration, how long it took, and the trace of its failure (None when it found nothing)."""

    exploration: Exploration
    elapsed_s: float
    trace: JvmTrace | None


def verify_on_jvm(mechanism: str, variant: str, config: str, hello: dict[str, Json], classpath: Sequence[Path],
                  make_model: Callable[[], Model[Any]], preemptions: int = DEFAULT_PREEMPTIONS,
                  budget_s: float = 60.0) -> JvmVerdict:
    """Every schedule of the configuration's adapter within `preemptions`, each in lockstep with the model when the
    adapter reports the model's labels, until a failure or the budget ends."""
    adapter = adapter_for(mechanism, config)
    started = time.monotonic()
    lockstep = Lockstep(make_model)
    with running(adapter, classpath, hello) as port:
        found = explore(port, lockstep, preemptions=preemptions, stop_at=started + budget_s)
        trace = None
        if found.violations:
            trace = JvmTrace(mechanism, variant, config, hello, found.schedule, found.violations,
                             tuple(_points(port, found.schedule)), lockstep.detail)
    return JvmVerdict(found, time.monotonic() - started, trace)


def _points(port: LockLevelPort, schedule: Sequence[str]) -> Iterator[str]:
    """Per step of `schedule` (run again from a reset), the thread and the point it runs from."""
    snap = port.reset()
    for thread in schedule:
        yield f"{thread}: {snap.thread(thread).point}"
        snap = port.run(thread)


def replay_on_jvm(trace: JvmTrace, classpath: Sequence[Path],
                  make_model: Callable[[], Model[Any]]) -> tuple[Replayed, str]:
    """Runs the trace's schedule on a fresh JVM with `classpath`, in lockstep with the model as `verify --jvm`; what
    it did, and what diverged (for a granularity divergence)."""
    adapter = adapter_for(trace.mechanism, trace.config)
    lockstep = Lockstep(make_model)
    with running(adapter, classpath, trace.hello) as port:
        return replay(port, trace.schedule, lockstep), lockstep.detail


def model_config(hello: dict[str, Json]) -> dict[str, Param]:
    """The model's configuration from a trace's hello (JSON arrays back to the tuples a configuration holds)."""
    return {key: _param(value) for key, value in hello.items()}


def _param(value: Json) -> Param:
    if isinstance(value, (list, tuple)):
        return tuple(_param(v) for v in value)
    if isinstance(value, dict):
        raise JvmSetupError(f"a configuration value is a record, not a parameter: {value!r}")
    return value


def _with_fewer_operations(hello: dict[str, Json]) -> Iterator[dict[str, Json]]:
    """Each hello with two consecutive operations, then one, fewer in one thread's script (a list of strings), last
    operations first: a pair goes where one alone cannot (a leave with the join after it)."""
    for size in (2, 1):
        for key, value in hello.items():
            if isinstance(value, list) and len(value) >= size and all(isinstance(v, str) for v in value):
                for index in reversed(range(len(value) - size + 1)):
                    yield {**hello, key: value[:index] + value[index + size:]}


def _model_of(make_model: Callable[[dict[str, Param]], Model[Any]], hello: dict[str, Json]) -> Model[Any]:
    return make_model(model_config(hello))


@dataclass(frozen=True)
class JvmShrink:
    """A shrink's outcome: the shortest failing trace found, and how many candidate scripts the JVM explored."""

    trace: JvmTrace
    candidates: int
    complete: bool
    """No single operation can be dropped any more (False: the budget ended first)."""


def shrink_on_jvm(trace: JvmTrace, classpath: Sequence[Path], make_model: Callable[[dict[str, Param]], Model[Any]],
                  preemptions: int = DEFAULT_PREEMPTIONS, budget_s: float = 60.0) -> JvmShrink:
    """Drops script operations, two or one at a time (ddmin's finest granularities), while the scripts left, explored on
    the JVM within `preemptions`, still fail with the trace's first name in no more steps; a candidate the model
    refuses (a leave with no join, an ack of an entry never pending) is skipped. The JVM explores each candidate's
    own schedules, so the result is the shortest failing schedule of the smallest scripts found."""
    stop = time.monotonic() + budget_s
    best, candidates = trace, 0
    while True:
        for hello in _with_fewer_operations(best.hello):
            if time.monotonic() >= stop:
                return JvmShrink(best, candidates, complete=False)
            try:
                make_model(model_config(hello))
            except ValueError:
                continue
            candidates += 1
            verdict = verify_on_jvm(best.mechanism, best.variant, best.config, hello, classpath,
                                    functools.partial(_model_of, make_model, hello), preemptions,
                                    max(stop - time.monotonic(), 1.0))
            found = verdict.trace
            if found is not None and found.names[:1] == trace.names[:1] and len(found.schedule) <= len(best.schedule):
                best = found
                break
        else:
            return JvmShrink(best, candidates, complete=True)
