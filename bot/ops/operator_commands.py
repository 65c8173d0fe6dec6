"""`whatsapp-bot operators`: the console's named operator accounts."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import TYPE_CHECKING, Any, Callable

import structlog

if TYPE_CHECKING:
    from bot.services import Services

log = structlog.get_logger(__name__)


def read_password(args: argparse.Namespace) -> str | None:
    """Return the new password: the first line of stdin with --password-stdin, else typed
    twice at a prompt (never an argument: it would sit in the shell's history)."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        print("the passwords differ; nothing changed", file=sys.stderr)
        return None
    return first


def cmd_add(services: Services, args: argparse.Namespace) -> int:
    """Add an operator, or give one a new password."""
    from bot.storage.operators import AccountError, OperatorStore, check_name

    store = OperatorStore(services.redis)
    try:
        check_name(args.name)  # before asking for a password
    except AccountError as err:
        print(err, file=sys.stderr)
        return 2
    password = read_password(args)
    if password is None:
        return 1
    existed = store.exists(args.name)
    try:
        store.add(args.name, password, created_by="cli")
    except AccountError as err:
        print(err, file=sys.stderr)
        return 2
    log.info("audit.operator_added", actor="cli", operator=args.name, replaced=existed)
    print(f"{'new password for' if existed else 'added'} operator {args.name}: sign in at /console")
    return 0


def cmd_list(services: Services, args: argparse.Namespace) -> int:
    """List the operators."""
    from bot.storage.operators import OperatorStore
    from bot.users.reports import iso

    operators = OperatorStore(services.redis).list()
    if args.json:
        print(json.dumps([{"name": o.name, "created_at": iso(o.created_at), "created_by": o.created_by}
                          for o in operators], indent=2))
        return 0
    for o in operators:
        print(f"{o.name:<33} added {iso(o.created_at) or '?'} by {o.created_by or '?'}")
    print(f"{len(operators)} operator(s); the admin token signs in as 'admin'", file=sys.stderr)
    return 0


def cmd_remove(services: Services, args: argparse.Namespace) -> int:
    """Remove an operator; their open sessions end at their next request."""
    from bot.storage.operators import OperatorStore

    existed = OperatorStore(services.redis).remove(args.name)
    log.info("audit.operator_removed", actor="cli", operator=args.name, existed=existed)
    print(("removed operator " if existed else "no such operator: ") + args.name)
    return 0 if existed else 1


def cmd_operators(services: Services, args: argparse.Namespace) -> int:
    """Run `operators add|list|remove`."""
    if args.action == "list":
        return cmd_list(services, args)
    if not args.name:
        print(f"usage: operators {args.action} NAME", file=sys.stderr)
        return 2
    return cmd_add(services, args) if args.action == "add" else cmd_remove(services, args)


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the operators command to the CLI's subparsers."""
    operators = sub.add_parser("operators", help="add, list or remove the console's operator accounts")
    operators.add_argument("action", choices=["add", "list", "remove"])
    operators.add_argument("name", nargs="?", help="the operator's name (lower case: letters, digits, . _ -)")
    operators.add_argument("--password-stdin", action="store_true",
                           help="add: read the password from the first line of stdin instead of a prompt")
    operators.add_argument("--json", action="store_true", help="list: print JSON")
    operators.set_defaults(func=cmd_operators)
