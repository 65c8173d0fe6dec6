"""`whatsapp-bot …`: the operator and developer commands."""

from bot.ops.cli import main

raise SystemExit(main())
