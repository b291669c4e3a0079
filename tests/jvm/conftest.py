"""The JVM controller's fixtures: the agent built once per session (in the session's cache folder), the toy
compiled against it, and a port factory that always closes its JVM."""

from __future__ import annotations

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
ORDERS = ("current", "locked-block")
"""The tracker orders the stand-ins have (`standins/<order>`, each compiled with `standins/common`)."""

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
def standin_classes(agent_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per tracker order, the stand-ins (upstream's packages and API, the project's code) compiled on their own:
    each folder is a CLASSPATH, as a user's build would be."""
    compiled = {}
    for order in ORDERS:
        out = tmp_path_factory.mktemp(f"standins-{order}")
        compile_java(sorted([*(STANDINS / "common").rglob("*.java"), *(STANDINS / order).rglob("*.java")]), out)
        compiled[order] = out
    return compiled


@pytest.fixture
def toy_port(toy_classes: Path) -> Iterator[PortFactory]:
    """Starts the toy scenario (`toy.TwoThreads`) with the agent rewriting `packages` (the whole toy package by
    default); every port started is closed at the test's end."""
    started: list[LockLevelPort] = []

    def start(config: dict[str, Json], packages: tuple[str, ...] = ("toy",)) -> LockLevelPort:
        port = LockLevelPort(java_command([toy_classes], packages, "brokerspec.jvm.Driver", "toy.TwoThreads"), config)
        started.append(port)
        return port

    yield start
    for port in started:
        port.close()


def line_of(source: str, text: str) -> int:
    """The 1-based line of the toy source `source` that holds `text` (the one place it appears)."""
    lines = [n for n, line in enumerate((TOY / source).read_text(encoding="utf-8").splitlines(), 1) if text in line]
    assert len(lines) == 1, (source, text, lines)
    return lines[0]
