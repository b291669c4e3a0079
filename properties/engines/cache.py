"""Explored graphs kept on disk between runs, keyed by what they were computed from.

TLC keeps its fingerprints; here a model's explored graph, the verdicts the explorer drew on it and the
conformance tour derived from it are kept, since the models rarely change between two checks while the
code under test does. An entry's key is a digest of the source of every module that can change the graph
(the models, the engines, the mechanism's binding: `code_digest`) with the configuration, the variant and
the search's bounds, so a changed model misses and is explored again, and nothing is ever invalidated by
hand. Only the model side is kept: the replay on the reference, which checks the code, always runs.

Entries are pickles written atomically (a temporary file renamed into place), so processes that fill the
same entry at once (pytest-xdist workers, parallel checks) each leave a whole one. A file that cannot be
read, or of another format, is a miss; a check then prunes the folder to `LIMIT_BYTES`, the entries used longest
ago first. The folder is `$BROKERSPEC_CACHE`, else `$XDG_CACHE_HOME/brokerspec`,
else `~/.cache/brokerspec`; `check --no-cache` reads and writes none.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMAT = 1
"""Bumped when what an entry holds changes shape: older entries then miss."""

LIMIT_BYTES = 512 * 1024 * 1024
"""What the folder may hold after a check: the entries used longest ago go first (one check of every mechanism
keeps about 20 MB, and each edit of a model adds its own entries beside the old ones)."""

ENV = "BROKERSPEC_CACHE"


def default_folder() -> Path:
    """Where entries live unless the caller says otherwise (see the module docstring)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "brokerspec"


def code_digest(roots: Iterable[Path]) -> str:
    """A digest of every Python source under `roots` (path and bytes), and of the interpreter's version: any edit
    of any of them gives another digest."""
    digest = hashlib.sha256(f"{FORMAT} {sys.version_info[:2]}".encode())
    for root in sorted(set(roots)):
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root.parent)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def key(*parts: object) -> str:
    """An entry's name from its parts (their `repr`s: configurations are dicts of plain values)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class GraphCache:
    """Entries by kind and key in one folder; `None` as the folder keeps nothing (every lookup misses)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0

    def get(self, kind: str, name: str) -> Any | None:
        """The entry, or None when it is absent or unreadable."""
        if self.folder is None:
            return None
        path = self.folder / kind / f"{name}.pickle"
        try:
            with path.open("rb") as file:
                stored_format, value = pickle.load(file)
            os.utime(path)  # used now: the last to be pruned
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
            stored_format, value = None, None
        if stored_format != FORMAT:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, kind: str, name: str, value: Any) -> None:
        """Store the entry atomically; a folder that cannot be written only costs the next run its reuse."""
        if self.folder is None:
            return
        folder = self.folder / kind
        written: Path | None = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{name}.", delete=False) as file:
                written = Path(file.name)
                pickle.dump((FORMAT, value), file, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(written, folder / f"{name}.pickle")
        except OSError:
            if written is not None:
                written.unlink(missing_ok=True)

    def prune(self, limit_bytes: int = LIMIT_BYTES) -> int:
        """Delete the entries used longest ago until the folder holds at most `limit_bytes`; how many went."""
        if self.folder is None:
            return 0
        entries = []
        for path in self.folder.glob("*/*.pickle"):
            try:
                status = path.stat()
            except OSError:
                continue
            entries.append((status.st_mtime, status.st_size, path))
        total = sum(size for _, size, _ in entries)
        pruned = 0
        for _, size, path in sorted(entries, key=lambda entry: entry[0]):
            if total <= limit_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            pruned += 1
        return pruned
