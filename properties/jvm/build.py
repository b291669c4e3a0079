"""Compile the JVM controller (`jvm/src`) on the user's machine, once per version of its sources.

Nothing is downloaded: the agent is built with the JDK's `javac` and `jar` against ASM from the distribution
(Debian's `libasm-java`, jars under /usr/share/java; `$BROKERSPEC_ASM` names another folder that holds
`asm.jar`, `asm-commons.jar` and `asm-tree.jar`). The output is kept under the cache folder
(`properties.engines.cache.default_folder()`, so `$BROKERSPEC_CACHE` moves it) in a folder named by a digest of
the sources, the ASM jars' names and sizes and the javac version: an edited source builds anew, a second run
reuses the jar. A folder appears whole or not at all (built beside it, then renamed), so parallel test workers
may build at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from properties.engines.cache import default_folder

SOURCES = Path(__file__).resolve().parents[2] / "jvm" / "src"
ASM_JARS = ("asm.jar", "asm-commons.jar", "asm-tree.jar")
ASM_ENV = "BROKERSPEC_ASM"
DEFAULT_ASM = Path("/usr/share/java")
MANIFEST = "Premain-Class: brokerspec.jvm.Agent\n"
JAVA_FLAGS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""A controller JVM runs a few thousand points, javac a few files: the client compiler and a small heap start them
fastest (javac: 2.0 s instead of 3.2 s wall, 0.75 s instead of 1.3 s CPU, on the stand-ins)."""


class JvmSetupError(Exception):
    """The JDK or ASM is missing, or the controller or a user's classes do not compile: one line says which."""


def asm_jars() -> tuple[Path, ...]:
    """The ASM jars the agent needs, or a JvmSetupError saying how to install them."""
    folder = Path(os.environ.get(ASM_ENV) or DEFAULT_ASM)
    jars = tuple(folder / name for name in ASM_JARS)
    missing = [str(jar) for jar in jars if not jar.is_file()]
    if missing:
        raise JvmSetupError(f"ASM not found: {', '.join(missing)} (Debian: apt-get install libasm-java; or set "
                            f"{ASM_ENV} to a folder holding {', '.join(ASM_JARS)})")
    return jars


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise JvmSetupError(f"{name} not found on PATH (Debian: apt-get install openjdk-17-jdk-headless)")
    return path


def _digest(sources: Sequence[Path], extra: Sequence[str]) -> str:
    digest = hashlib.sha256("\0".join(extra).encode())
    for path in sources:
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def compile_java(sources: Sequence[Path], out: Path, classpath: Sequence[Path] = ()) -> None:
    """javac `sources` into `out`, or a JvmSetupError with javac's first error line."""
    command = [_tool("javac"), *(f"-J{flag}" for flag in JAVA_FLAGS), "-nowarn", "-encoding", "UTF-8", "-d", str(out)]
    if classpath:
        command += ["-cp", os.pathsep.join(map(str, classpath))]
    done = subprocess.run([*command, *map(str, sources)], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
        raise JvmSetupError(f"javac failed: {first}")


def controller_jar(cache: Path | None = None) -> Path:
    """The agent jar (built now if this version of the sources has none yet)."""
    sources = sorted(SOURCES.rglob("*.java"))
    jars = asm_jars()
    version = subprocess.run([_tool("javac"), "-version"], capture_output=True, text=True, timeout=60,
                             check=False).stdout.strip()
    key = _digest(sources, [version, *(f"{jar.name}:{jar.stat().st_size}" for jar in jars)])
    folder = (cache or default_folder()) / "jvm" / key
    jar = folder / "controller.jar"
    if jar.is_file():
        return jar
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch:
        work = Path(scratch)
        (work / "classes").mkdir()
        compile_java(sources, work / "classes", jars)
        (work / "MANIFEST.MF").write_text(MANIFEST, encoding="utf-8")
        (work / "out").mkdir()
        subprocess.run([_tool("jar"), "--create", "--file", str(work / "out" / "controller.jar"), "--manifest",
                        str(work / "MANIFEST.MF"), "-C", str(work / "classes"), "."], check=True, timeout=120,
                       capture_output=True)
        try:
            (work / "out").rename(folder)
        except OSError:  # another process built the same version meanwhile: its jar is as good
            if not jar.is_file():
                raise
    return jar


def java_command(classpath: Sequence[Path | str], packages: Sequence[str], main: str, *args: str,
                 cache: Path | None = None) -> list[str]:
    """The argv of a JVM that rewrites `packages` (dotted package prefixes or class names) and runs `main`, with the
    controller and ASM ahead of `classpath` (the user's classes or jars)."""
    if not packages:
        raise JvmSetupError("name at least one package or class for the agent to rewrite")
    jar = controller_jar(cache)
    path = os.pathsep.join(str(p) for p in (jar, *asm_jars(), *classpath))
    return [_tool("java"), *JAVA_FLAGS, f"-javaagent:{jar}={','.join(packages)}", "-cp", path, main, *args]
