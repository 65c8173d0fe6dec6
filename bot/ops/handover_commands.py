"""`whatsapp-bot handover`: take a conversation over for a person, or hand it back."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.services import Services


def cmd_handover(services: Services, args: argparse.Namespace) -> int:
    """Pause the bot for one user (on), let it answer again (off), or show the takeover (status)."""
    from bot.users.handover import hand_back, take_over
    from bot.users.reports import handover_report, iso

    user = args.user
    if args.state == "on":
        handover = take_over(services.users, services.handover, user, actor="cli", via="cli")
        print(f"handover on for {user}: the bot is paused until {iso(handover.expires_at) or 'hand-back'}; "
              "answer from the console")
        return 0
    if args.state == "off":
        pairs = hand_back(services.users, services.handover, user, actor="cli", via="cli")
        print(f"handover off for {user}: the bot answers again; {pairs} pair(s) of the handover stored")
        return 0
    report = handover_report(services.users, user)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    state = report["handover"]
    if state is None:
        print(f"{user}: no handover (the bot answers)")
    else:
        print(f"{user}: handed over to {state['by']} since {iso(state['since'])}, "
              f"until {iso(state['expires_at']) or 'hand-back'}" + (", notice sent" if state["notified"] else ""))
    for entry in report["handover_log"]:
        who = "user" if entry["role"] == "user" else f"person ({entry['by']})"
        status = f"  [{entry['status']}" + (f" {entry['error_code']}" if entry["error_code"] else "") + "]" \
            if entry["status"] else ""
        print(f"  {who}: {entry['text']}{status}")
    return 0


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the handover command to the CLI's subparsers."""
    handover = sub.add_parser("handover", help="pause the bot for one user while a person answers, or hand back")
    handover.add_argument("user", type=e164, help="the user's number, +E164")
    handover.add_argument("state", nargs="?", choices=["on", "off", "status"], default="status")
    handover.add_argument("--json", action="store_true", help="print JSON (status)")
    handover.set_defaults(func=cmd_handover)
