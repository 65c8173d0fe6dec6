"""The task and usage commands of `whatsapp-bot`: task on|off per user, usage and cost."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.services import Services


def cmd_task(services: Services, args: argparse.Namespace) -> int:
    """Turn the task call on or off for one user (as /task:on and /task:off do)."""
    from bot.users.lifecycle import set_task_extraction

    set_task_extraction(services.users, args.user, args.state == "on", actor="cli", via="cli")
    note = "" if services.settings.TASK_EXTRACTION == "on" else " (TASK_EXTRACTION is off: no task call for anyone)"
    print(f"task extraction {args.state} for {args.user}{note}")
    return 0


def cmd_usage(services: Services, args: argparse.Namespace) -> int:
    """Print model tokens and cost by purpose, for one user or the top users."""
    from bot.users.reports import usage_report, usage_totals

    prices = services.settings.model_prices
    if args.user:
        rows = usage_report(services.users, args.user, prices)
        out: dict[str, Any] = {"user": args.user, "by_purpose": rows, "total": usage_totals(rows)}
        if args.json:
            print(json.dumps(out, indent=2))
            return 0
        print(f"{args.user}: {out['total']['calls']} model calls")
        for r in rows:
            cost = "no price" if r["cost_usd"] is None else f"${r['cost_usd']:.6f}"
            audio = f"  {r['audio_seconds']} s audio" if r["audio_seconds"] else ""
            print(f"  {r['purpose']:13} {r['model']:24} {r['calls']:5} calls  {r['prompt_tokens']:8} in  "
                  f"{r['completion_tokens']:7} out{audio}  {cost}")
        return 0
    users = []
    for user in services.usage.users():
        total = usage_totals(usage_report(services.users, user, prices))
        users.append({"user": user, **total})
    users.sort(key=lambda u: (-(u["cost_usd"] or 0), -(u["prompt_tokens"] + u["completion_tokens"])))
    users = users[: args.top]
    if args.json:
        print(json.dumps({"users": users, "priced": bool(prices)}, indent=2))
        return 0
    print(f"top {len(users)} users by {'cost' if prices else 'tokens (set MODEL_PRICES for cost)'}:")
    for u in users:
        cost = "" if u["cost_usd"] is None else f"  ${u['cost_usd']:.6f}"
        print(f"  {u['user']}  {u['calls']} calls  {u['prompt_tokens']} in  {u['completion_tokens']} out{cost}")
    return 0


def cmd_eval_tasks(services: Services, args: argparse.Namespace) -> int:
    """`eval tasks`: flag accuracy and dropped context, against the model (or the stand-in)."""
    try:
        from bot.dev.evaluation import answered_by, eval_llm
        from bot.dev.task_evaluation import evaluate_tasks, load_dialogues, print_task_report
    except ImportError as err:  # the development extra
        print(f"eval needs the development tools ({err.name} is missing): pip install -e '.[dev]'", file=sys.stderr)
        return 2
    dialogues = load_dialogues(args.data)[: args.limit or None]
    llm = eval_llm(services, args.base_url, args.model, args.api_key)
    model = args.model or services.settings.task_model
    report = evaluate_tasks(dialogues, llm, services.prompts.task, model)
    report.update(model=model, answered_by=answered_by(llm.client), endpoint=str(llm.client.base_url))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print_task_report(report)
    return 0


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the task and usage commands to the CLI's subparsers."""
    task = sub.add_parser("task", help="turn the task call before each reply on or off for one user")
    task.add_argument("user", type=e164, help="the user's number, +E164")
    task.add_argument("state", choices=["on", "off"])
    task.set_defaults(func=cmd_task)

    usage = sub.add_parser("usage", help="model tokens and cost by purpose, for one user or the top users")
    usage.add_argument("user", nargs="?", type=e164, help="the user's number, +E164 (default: the top users)")
    usage.add_argument("--top", type=int, default=20, help="how many users, without a number")
    usage.add_argument("--json", action="store_true", help="print JSON")
    usage.set_defaults(func=cmd_usage)
