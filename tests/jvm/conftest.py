"""The JVM controller's fixtures: the agent built once per session (in the session's cache folder), the toy
compiled against it, and a port factory that always closes its JVM."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from models.core import Json
from properties.jvm.build import JvmSetupError, asm_jars, compile_java, controller_jar, java_command
from properties.jvm.threads import LockLevelPort
from tests.ports.tools import need

TOY = Path(__file__).with_name("toy")
STANDINS = Path(__file__).with_name("standins")
ORDERS = {"keyshared": ("current", "locked-block", "pre23854"),
          "topiclist": ("current", "fixed", "finding-fix", "unswapped")}
"""The orders the stand-ins have, per mechanism (`standins/<mechanism>/<order>`, each compiled with its
`standins/<mechanism>/common`)."""

PortFactory = Callable[..., LockLevelPort]


@pytest.fixture(scope="session")
def agent_jar() -> Path:
    need("javac", "java", "jar", package="openjdk-17-jdk-headless")
    try:
        asm_jars()
    except JvmSetupError as missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (CI is set: .ci/run installs libasm-java)")
        pytest.skip(str(missing))
    return controller_jar()


@pytest.fixture(scope="session")
def toy_classes(agent_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jvm-toy")
    compile_java(sorted(TOY.glob("*.java")), out, [agent_jar])
    return out


@pytest.fixture(scope="session")
def standin_classes(agent_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Per mechanism and order, the stand-ins (upstream's packages and API, the project's code) compiled on their
    own: each folder is a CLASSPATH, as a user's build would be."""
    compiled = {}
    for mechanism, orders in ORDERS.items():
        for order in orders:
            out = tmp_path_factory.mktemp(f"standins-{mechanism}-{order}")
            root = STANDINS / mechanism
            compile_java(sorted([*(root / "common").rglob("*.java"), *(root / order).rglob("*.java")]), out)
            compiled[mechanism, order] = out
    return compiled


@pytest.fixture(scope="session")
def _toy_ports(toy_classes: Path) -> Iterator[dict[tuple[str, tuple[str, ...]], LockLevelPort]]:
    """The toy's JVMs, one per configuration and rewritten packages, kept for the session (closed at its end)."""
    ports: dict[tuple[str, tuple[str, ...]], LockLevelPort] = {}
    yield ports
    for port in ports.values():
        port.close()


@pytest.fixture
def toy_port(toy_classes: Path, _toy_ports: dict[tuple[str, tuple[str, ...]], LockLevelPort]) -> PortFactory:
    """The toy scenario (`toy.TwoThreads`) on `config` with the agent rewriting `packages` (the whole toy package by
    default), in its initial state: a JVM started once per configuration and packages, reset for each test (a
    reset must give the hello's state: `test_a_reset_brings_back_the_initial_state` checks it on a JVM of its
    own)."""

    def start(config: dict[str, Json], packages: tuple[str, ...] = ("toy",)) -> LockLevelPort:
        key = (json.dumps(config, sort_keys=True), packages)
        port = _toy_ports.get(key)
        if port is None:
            argv = java_command([toy_classes], packages, "brokerspec.jvm.Driver", "toy.TwoThreads")
            port = _toy_ports[key] = LockLevelPort(argv, config)
        else:
            port.reset()
        return port

    return start


def line_of(source: str, text: str) -> int:
    """The 1-based line of the toy source `source` that holds `text` (the one place it appears)."""
    lines = [n for n, line in enumerate((TOY / source).read_text(encoding="utf-8").splitlines(), 1) if text in line]
    assert len(lines) == 1, (source, text, lines)
    return lines[0]
