"""``python -m virtualstac``: the ``virtualstac`` command, as its console script runs it."""

from virtualstac.cli import main

raise SystemExit(main())
