"""The entity commands of `whatsapp-bot`: entities, entities reextract, recall."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.services import Services


def _bar(total: int) -> Callable[[int, str], None]:
    """Return a progress callback that draws a bar on stderr."""

    def draw(done: int, _user: str) -> None:
        filled = int(30 * done / total) if total else 30
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} users", end="", file=sys.stderr, flush=True)
        if done == total:
            print(file=sys.stderr)

    return draw


def cmd_entities(services: Services, args: argparse.Namespace) -> int:
    """List one user's entities, or (`reextract`) rebuild entities from facts."""
    from bot.config import E164
    from bot.users.reports import entity_report

    if args.target == "reextract":
        return _reextract(services, args)
    user = args.target.removeprefix("whatsapp:")
    if not E164.match(user):
        print(f"{args.target!r} is neither `reextract` nor an E.164 number like +14155550100", file=sys.stderr)
        return 2
    found = entity_report(services.users, user)
    if args.json:
        print(json.dumps({"user": user, "entities": found}, indent=2, ensure_ascii=False))
        return 0
    print(f"{len(found)} entities")
    for e in found:
        aliases = f"  also: {', '.join(e['aliases'])}" if e["aliases"] else ""
        print(f"  {e['name']} ({e['type']}, confidence {e['confidence']:.2f}){aliases}")
        print(f"    mentioned in: {', '.join(e['facts'])}")
        if e["related"]:
            print("    related: " + ", ".join(f"{k} {w:.2f}" for k, w in e["related"].items()))
    return 0


def _reextract(services: Services, args: argparse.Namespace) -> int:
    from bot.storage.users import scan_fact_users
    from bot.users.entities import reextract

    if args.all == bool(args.user):
        print("entities reextract: give one +E164 number, or --all", file=sys.stderr)
        return 2
    users = sorted(scan_fact_users(services.redis)) if args.all else [args.user]
    prompt = services.prompts.entities
    print(f"re-extracting entities with {prompt.ref} for {len(users)} users, at most "
          f"{args.per_minute:g} model calls a minute (stop any time: a new run resumes)", file=sys.stderr)
    report = reextract(services.users, services.settings, services.llm, prompt, users,
                       calls_per_minute=args.per_minute, progress=_bar(len(users)))
    out: dict[str, Any] = report.as_dict()
    print(json.dumps(out, indent=2) if args.json else
          f"rebuilt {out['rebuilt']}, already up to date {out['up_to_date']}, opted out "
          f"{out['skipped_opted_out']}, failed {len(out['failed'])}; {out['model_calls']} model calls")
    return 1 if report.failed else 0


def cmd_recall(services: Services, args: argparse.Namespace) -> int:
    """Show which entities a text names and which facts it would bring into the prompt."""
    from bot.users.memory import preview_selection, selection_report

    s = services
    selection = preview_selection(s.users, s.settings, s.counter, args.user, args.text)
    report = selection_report(selection)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print("entities named:" if selection.matches else "entities named: none")
    for m in selection.matches:
        print(f"  {m.name} ({m.type}) by {m.strategy} {m.score:.2f}, from {m.text!r}")
    print(f"facts it would inject ({report['tokens']} tokens):")
    for item in report["selected"]:
        print(f"  {item['key']} = {item['value']}  [{item['why'] or 'budget left'}]")
    return 0


def cmd_eval_entities(services: Services, args: argparse.Namespace) -> int:
    """`eval entities`: the deterministic figures (exit 1 if a target is missed), then pass 2
    against the model unless --no-model."""
    try:
        from bot.dev import entity_evaluation as ev
        from bot.dev.evaluation import answered_by, eval_llm
    except ImportError as err:  # the development extra
        print(f"eval needs the development tools ({err.name} is missing): pip install -e '.[dev]'", file=sys.stderr)
        return 2
    s = services.settings
    users = ev.load_users(args.data)[: args.limit or None]
    report = ev.evaluate_deterministic(users, threshold=s.ENTITY_FUZZY_THRESHOLD,
                                       similarity=s.ENTITY_MERGE_SIMILARITY, related_weight=s.ENTITY_RELATED_WEIGHT)
    report["targets_met"] = ev.meets_targets(report)
    if not args.no_model:
        llm = eval_llm(services, args.base_url, args.model, args.api_key)
        model = args.model or s.entity_model
        report["model_part"] = ev.evaluate_model(users, llm, services.prompts.entities, model)
        report["model_part"].update(model=model, answered_by=answered_by(llm.client), endpoint=str(llm.client.base_url))
        task_model = args.model or s.task_model
        report["task_check"] = ev.evaluate_task_check(users, llm, services.prompts.task, task_model,
                                                      threshold=s.ENTITY_FUZZY_THRESHOLD)
        report["task_check"].update(model=task_model, answered_by=answered_by(llm.client))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        ev.print_entity_report(report)
    return 0 if all(report["targets_met"].values()) else 1


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the entity commands to the CLI's subparsers."""
    entities = sub.add_parser("entities", help="one user's entities; `entities reextract` rebuilds them from facts")
    entities.add_argument("target", help="the user's number, +E164, or `reextract`")
    entities.add_argument("user", nargs="?", type=e164, help="reextract: the user's number")
    entities.add_argument("--all", action="store_true", help="reextract: every user with facts (SCAN)")
    entities.add_argument("--per-minute", type=float, default=60.0, help="reextract: model calls a minute at most")
    entities.add_argument("--json", action="store_true", help="print JSON")
    entities.set_defaults(func=cmd_entities)

    what = sub.add_parser("recall", help="which entities a text names, and the facts it would bring")
    what.add_argument("user", type=e164, help="the user's number, +E164")
    what.add_argument("text", help="the message, quoted")
    what.add_argument("--json", action="store_true", help="print JSON")
    what.set_defaults(func=cmd_recall)
