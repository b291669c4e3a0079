"""`python -m properties.cli`: the `brokerspec` command without the installed script."""

from properties.cli.main import main

raise SystemExit(main())
