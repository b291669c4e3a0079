"""The external tools the port tests run (a JDK, Node): missing locally, a test says so by name and skips;
missing in CI (`CI` set), it fails, since CI must run every port (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil

import pytest


def need(*tools: str, package: str) -> None:
    """Fail in CI, else skip with the tool and the Debian package named, when any of `tools` is not on PATH."""
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not on PATH: apt-get install {package}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: CI must run this port)")
    pytest.skip(message)
