"""`whatsapp-bot` (.venv/bin/whatsapp-bot): the operator and developer commands.

`chat` starts on its own, without loading the rest (bot/ops/chat_command.py), so its prompt
shows at once; every other command runs in bot/ops/commands.py.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run one command."""
    args = list(sys.argv[1:] if argv is None else argv)
    if hasattr(sys.stdout, "reconfigure"):  # whole lines, so stderr's notes never split one
        sys.stdout.reconfigure(line_buffering=True)
    if args[:1] == ["chat"] and not {"-h", "--help"} & set(args):
        from bot.ops.chat_command import main as chat

        return chat(args[1:])
    from bot.ops.commands import main as run

    return run(args)
