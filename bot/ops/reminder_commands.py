"""`whatsapp-bot reminders list|add|cancel +E164`: a user's reminders (docs/reminders.md)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.services import Services


def cmd_reminders(services: Services, args: argparse.Namespace) -> int:
    """List, set or cancel a user's reminders; 2 when refused (the reason on stderr)."""
    import sys

    from bot.reminders.book import ReminderError
    from bot.users.reminders import add_reminder, cancel_reminder, explain, list_reminders

    book = services.reminders
    assert book is not None
    try:
        if args.action == "list":
            rows = list_reminders(services.users, args.user)
            if args.json:
                print(json.dumps(rows, ensure_ascii=False, indent=2))
            for row in [] if args.json else rows:
                why = f" ({row['why']})" if row.get("why") else ""
                print(f"{row['id']}  {row['when']} {row['time_zone']}  {row['status']}{why}  {row['text']}")
            if not rows and not args.json:
                print(f"{args.user}: no reminders")
            return 0
        if args.action == "add":
            made = add_reminder(services.users, book, args.user, args.text, args.due, actor="cli", via="cli")
            print(f"{made['id']}: {made['when']} {made['time_zone']}: {made['text']}")
            for note in made["notes"]:
                print(f"note: {note}", file=sys.stderr)
            return 0
        done = cancel_reminder(book, args.user, args.id, actor="cli", via="cli")
        print(f"{done['id']}: cancelled ({done['when']}: {done['text']})")
        return 0
    except ReminderError as err:
        print(f"refused: {explain(err)}", file=sys.stderr)
        return 2


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add `reminders list|add|cancel`."""
    parser = sub.add_parser("reminders", help="a user's reminders: list, add, cancel")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every reminder kept for the user")
    listing.add_argument("user", type=e164, help="the user's number, +E164")
    listing.add_argument("--json", action="store_true", help="as JSON")
    adding = actions.add_parser("add", help="set one: reminders add +E164 2026-12-01T09:00 'text'")
    adding.add_argument("user", type=e164)
    adding.add_argument("due", help="ISO 8601, in the user's time zone unless it has an offset")
    adding.add_argument("text")
    cancelling = actions.add_parser("cancel", help="cancel one waiting, by its id (from list)")
    cancelling.add_argument("user", type=e164)
    cancelling.add_argument("id")
    for each in (listing, adding, cancelling):
        each.set_defaults(func=cmd_reminders)
