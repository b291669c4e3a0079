"""The `brokerspec` command line: the top floor, which imports every other and is imported by none.

One module per group of subcommands: `check` (check, explore, prove), `main` (the parser and the
trace, port, pipeline and bench commands), `bench`, `mutants`, `promote` and `report`; `common`
holds the exit codes and helpers they share.
"""

from properties.cli.common import DIVERGED, INFRA, INTERRUPTED, PASS, USAGE, VIOLATED
from properties.cli.main import main

__all__ = ["DIVERGED", "INFRA", "INTERRUPTED", "PASS", "USAGE", "VIOLATED", "main"]
