"""`whatsapp-bot optout|optin +E164`: stop (or allow again) every message the business starts
for a user, as their own STOP and START do (docs/window.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.services import Services


def cmd_optout(services: Services, args: argparse.Namespace) -> int:
    """Record the user's STOP (optout) or START (optin) for them."""
    from bot.users.lifecycle import set_messages_off

    off = args.command == "optout"
    set_messages_off(services.users, args.user, off, actor="cli", via="cli")
    print(f"{args.user}: " + ("the business no longer writes first (templates, held messages, reminders)" if off
                              else "the business may write first again"))
    return 0


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add `optout` and `optin`."""
    for name, text in (("optout", "stop every message the business starts for a user (as their STOP)"),
                       ("optin", "allow them again (as their START)")):
        parser = sub.add_parser(name, help=text)
        parser.add_argument("user", type=e164, help="the user's number, +E164")
        parser.set_defaults(func=cmd_optout)
