"""`python -m bot …`: the operator and developer commands."""

from bot.cli import main

raise SystemExit(main())
