"""Measure task extraction (docs/tasks.md): TASK_EXTRACTION=on against off, through the webhook.

Prints figures; asserts nothing. The app is built twice with `bot.create_app` (on, off) on a
private embedded Redis and the model stand-in over HTTP, and signed Twilio webhooks are posted
through Flask's test client. The conversations are the 56 dialogues of
bot/dev/eval_data/tasks.json: each dialogue is one user (+1555100xxxx on, +1555200xxxx off),
seeded before its first message with the dialogue's stored facts (one fact per fact key, a
made-up value; the value is the entity's name where the dialogue names a fitting entity), its
known entities (each pointing at a fact) and its summary (where it has one); then its recent
user turns are sent, then its message. The stand-in answers task requests with its
deterministic heuristics (bot/dev/standin_tasks.py) and replies with canned text, so the recent
assistant turns are the stand-in's, not the dialogue's.

Messages run in two phases: first every dialogue's recent user turns, then every dialogue's
final message (the one the task labels describe); --workers dialogues at a time, one message
at a time per user. Figures are for the final messages and for all messages. Model requests
are classified by their last user message: "Known fact keys:" is a task call, anything else a
reply (summaries and fact extraction do not run: SUMMARY_EVERY_N_PAIRS=10, EXTRACTION_INTERVAL=0).
Cost: MODEL_PRICES (--prices) over the tokens the stand-in reported (its own token count).

    .venv/bin/python bench/bench_tasks.py
    .venv/bin/python bench/bench_tasks.py --latency-ms 800 --reply-model gpt-4o --task-model gpt-4o-mini
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import pct  # noqa: E402
from bot import create_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.config.tasks import parse_prices  # noqa: E402
from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.dev.standin import CANNED_NOTICE, StandinModel  # noqa: E402
from bot.dev.standin_tasks import extract_request_task  # noqa: E402
from bot.memory.entities import Mention, absorb  # noqa: E402
from bot.memory.entity_extraction import EntityRules  # noqa: E402
from bot.llm.fence import inert  # noqa: E402
from bot.memory.rules import merge_facts  # noqa: E402
from bot.observability.logs import configure_logging  # noqa: E402
from bot.services import Services, build_services  # noqa: E402
from bot.storage.entities import EntityState, fact_hash  # noqa: E402
from bot.storage.records import Fact  # noqa: E402
from bot.storage.triggers import ENTITIES, SUMMARY  # noqa: E402

DATA = ROOT / "bot" / "dev" / "eval_data" / "tasks.json"
TOKEN = "t" * 32
URL = "http://localhost/whatsapp"
TASK_MARK = "Known fact keys:"  # only task requests carry it (render_task_request)
DEFAULT_PRICES = '{"gpt-4o": [2.5, 10.0], "gpt-4o-mini": [0.15, 0.6]}'
PREFIX = {"on": "+1555100", "off": "+1555200"}

#: Made-up values of the dialogues' fact keys, and their categories.
VALUES: dict[str, tuple[str, str]] = {
    "name": ("Alex", "identity"), "city": ("Lisbon", "location"), "occupation": ("nurse", "work"),
    "diet": ("vegetarian", "diet"), "employer": ("Acme Corp", "work"), "allergies": ("peanuts", "health"),
    "dog_name": ("Rex", "family"), "daughter": ("Sofia, 7", "family"), "partner": ("Sam", "family"),
    "favourite_genre": ("jazz", "preference"), "dog_breed": ("beagle", "family"),
    "fitness_goal": ("run a 10k in May", "health"), "injuries": ("sore left knee", "health"),
    "son": ("Tom, 5", "family"), "landlord": ("Mr. Silva", "other"), "favourite_music": ("bossa nova", "preference"),
    "dog_age": ("4 years", "family"), "dog_weight": ("12 kg", "family"), "neighbourhood": ("Alfama", "location"),
    "wife": ("Ana", "family"), "wife_hobbies": ("pottery and hiking", "family"),
    "wedding_anniversary": ("12 June", "schedule"), "gym": ("Fitness Hut", "schedule"),
    "school": ("Escola Básica do Porto", "family"), "dentist": ("Dr. Costa", "health"),
    "dentist_appointment": ("Tuesday 10:00", "schedule"), "interests": ("photography, hiking", "preference"),
    "commute": ("train, 40 minutes", "work"), "office_location": ("Porto", "work"),
    "work_schedule": ("Mon-Fri 9-17", "schedule"), "native_language": ("Portuguese", "identity"),
    "grandmother": ("Rosa", "family"), "mother": ("Helena", "family"), "mother_interests": ("gardening", "family"),
    "mother_birthday": ("3 May", "schedule"), "phone_model": ("iPhone 15", "preference"),
}
#: The fact an entity of each type points at, first key the dialogue has; else "name".
ENTITY_FACTS = {
    "PLACE": ("city", "neighbourhood", "office_location"),
    "PERSON": ("partner", "wife", "daughter", "son", "mother", "grandmother", "landlord", "dentist"),
    "PET": ("dog_name",),
    "ORG": ("employer", "gym", "school"),
}


@dataclass
class Sent:
    """One message posted, and what came back."""

    dialogue: str
    final: bool
    ms: float
    status: int
    canned: bool


@dataclass
class Mode:
    """What one mode's run recorded."""

    name: str
    sent: list[Sent] = field(default_factory=list)
    reported_all: list[dict[str, Any]] = field(default_factory=list)
    reported_final: list[dict[str, Any]] = field(default_factory=list)
    tasks_metric: dict[str, float] = field(default_factory=dict)
    seeded: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


# -- the webhook ------------------------------------------------------------------------------


def inbound_form(body: str, user: str) -> dict[str, str]:
    """Return the form Twilio posts for an inbound WhatsApp message (tests/conftest.py)."""
    return {
        "From": f"whatsapp:{user}",
        "To": "whatsapp:+14155238886",
        "Body": body,
        "MessageSid": "SM" + uuid.uuid4().hex,
        "AccountSid": "AC" + "0" * 32,
        "NumMedia": "0",
        "ProfileName": "Bench User",
        "WaId": user.lstrip("+"),
    }


def post(app: Any, body: str, user: str) -> tuple[float, int, bool]:
    """Post one signed message; return client-side ms, status and whether the reply is canned
    (the model answered) rather than a fallback or notice."""
    form = inbound_form(body, user)
    signature = RequestValidator(TOKEN).compute_signature(URL, form)
    client = app.test_client()
    t0 = time.perf_counter()
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": signature})
    ms = (time.perf_counter() - t0) * 1000
    return ms, response.status_code, CANNED_NOTICE in response.get_data(as_text=True)


# -- seeding -------------------------------------------------------------------------------------


def seed(s: Services, user: str, dialogue: dict[str, Any], counts: dict[str, int]) -> None:
    """Store the dialogue's facts, entities and summary for this user."""
    keys = list(dialogue["fact_keys"])
    values = {k: VALUES.get(k, ("noted", "other")) for k in keys}
    pointed: list[tuple[dict[str, str], str]] = []
    for entity in dialogue["entities"]:
        key = next((k for k in ENTITY_FACTS.get(entity["type"], ()) if k in keys), "name")
        if key != "name" and key not in {k for _, k in pointed}:
            values[key] = (entity["name"], values[key][1])  # the fact names the entity
        pointed.append((entity, key))
    now = time.time()
    incoming = [Fact(key=k, value=v, category=c, confidence=0.9, importance=0.6, source="auto",
                     provenance="bench") for k, (v, c) in values.items()]
    s.facts.merge(user, "user", lambda existing: merge_facts(
        existing, incoming, threshold=0.7, max_facts=50, conflict_margin=0.1, now=now))
    stored = s.facts.load(user, "user")
    counts["facts"] += len(stored)
    if pointed:
        rules = EntityRules.from_settings(s.settings)
        mentions = [Mention(e["name"], e["type"], facts=(k,), confidence=0.9) for e, k in pointed]
        token = s.store.take_trigger(user, ENTITIES)

        def change(now_state: EntityState) -> EntityState:
            merged, _ = absorb(now_state.entities, mentions, list(stored), similarity=rules.merge_similarity,
                               min_confidence=rules.min_confidence, max_entities=rules.max_entities)
            return EntityState(entities=merged, read={fact_hash(f) for f in stored.values()},
                               prompt_version=s.prompts.entities.version)

        state = s.entities.update(user, token, change)
        counts["entities"] += len(state.entities) if state else 0
    if dialogue["summary"]:
        token = s.store.take_trigger(user, SUMMARY)
        applied, _ = s.store.apply_summary(user, token, 0, 0, dialogue["summary"])
        counts["summaries"] += applied


# -- one mode ------------------------------------------------------------------------------------


def tasks_metric() -> dict[str, float]:
    """Return bot_tasks_total by result."""
    return {r: REGISTRY.get_sample_value("bot_tasks_total", {"result": r}) or 0.0
            for r in ("extracted", "bypassed", "failed", "invalid")}


def run_mode(mode: str, args: argparse.Namespace, redis_url: str, model: StandinModel,
             dialogues: list[dict[str, Any]]) -> Mode:
    """Seed the users, send every dialogue's recent turns, then every final message."""
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        REDIS_URL=redis_url,
        REDIS_CLUSTER=False,
        OPENAI_BASE_URL=model.url,
        OPENAI_API_KEY="x",
        TWILIO_AUTH_TOKEN=TOKEN,
        TASK_EXTRACTION=mode,
        EXTRACTION_INTERVAL=0,
        SUMMARY_EVERY_N_PAIRS=10,
        MODEL_PRICES=args.prices,
        OPENAI_MODEL=args.reply_model,
        TASK_MODEL=args.task_model,
        LOG_LEVEL="WARNING",
    )
    out = Mode(mode, seeded={"facts": 0, "entities": 0, "summaries": 0})
    users = {d["id"]: f"{PREFIX[mode]}{i:04d}" for i, d in enumerate(dialogues)}
    seeder = build_services(settings)
    app = create_app(settings)
    try:
        for d in dialogues:
            seed(seeder, users[d["id"]], d, out.seeded)
        model.reset()
        before = tasks_metric()
        started = time.perf_counter()

        def history(d: dict[str, Any]) -> list[Sent]:
            sent = []
            for turn in d["recent"]:
                ms, status, canned = post(app, turn["user"], users[d["id"]])
                sent.append(Sent(d["id"], False, ms, status, canned))
            return sent

        def final(d: dict[str, Any]) -> list[Sent]:
            ms, status, canned = post(app, d["message"], users[d["id"]])
            return [Sent(d["id"], True, ms, status, canned)]

        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            for sent in pool.map(history, dialogues):
                out.sent += sent
            mark = len(model.reported())  # every answer is reported before it is sent
            for sent in pool.map(final, dialogues):
                out.sent += sent
        out.wall_s = time.perf_counter() - started
        out.reported_all = model.reported()
        out.reported_final = out.reported_all[mark:]
        after = tasks_metric()
        out.tasks_metric = {r: after[r] - before[r] for r in after}
    finally:
        for s in (seeder, app.extensions["bot.services"]):
            s.redis.close()
            s.jobs.connection.close()
    return out


# -- figures -------------------------------------------------------------------------------------


def split(reported: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (task calls, reply calls)."""
    tasks = [r for r in reported if TASK_MARK in r["last_user"]]
    return tasks, [r for r in reported if TASK_MARK not in r["last_user"]]


def cost(reported: list[dict[str, Any]], prices: dict[str, tuple[float, float]], missing: set[str]) -> float:
    """Return the USD cost of these calls."""
    total = 0.0
    for r in reported:
        if r["model"] not in prices:
            missing.add(r["model"])
            continue
        pin, pout = prices[r["model"]]
        total += (r["prompt_tokens"] * pin + r["completion_tokens"] * pout) / 1e6
    return total


def figures(mode: Mode, final_only: bool, prices: dict[str, tuple[float, float]],
            missing: set[str]) -> dict[str, float]:
    """Return one mode's figures over the final messages or all of them."""
    sent = [s for s in mode.sent if s.final or not final_only]
    reported = mode.reported_final if final_only else mode.reported_all
    tasks, replies = split(reported)
    n = len(sent)
    ms = [s.ms for s in sent]
    flags = [extract_request_task(t["last_user"]) for t in tasks]
    return {
        "n": n, "p50": pct(ms, 50), "p99": pct(ms, 99), "mean_ms": sum(ms) / max(1, n),
        "replies": len(replies), "tasks": len(tasks),
        "reply_prompt": sum(r["prompt_tokens"] for r in replies) / max(1, n),
        "reply_completion": sum(r["completion_tokens"] for r in replies) / max(1, n),
        "task_prompt": sum(t["prompt_tokens"] for t in tasks) / max(1, n),
        "task_completion": sum(t["completion_tokens"] for t in tasks) / max(1, n),
        "cost_1k": 1000 * cost(reported, prices, missing) / max(1, n),
        "reply_cost_1k": 1000 * cost(replies, prices, missing) / max(1, n),
        "task_cost_1k": 1000 * cost(tasks, prices, missing) / max(1, n),
        "no_history": sum(not f["depends_on_chat_history"] for f in flags),
        "no_memory": sum(not f["depends_on_user_memory"] for f in flags),
        "neither": sum(not f["depends_on_chat_history"] and not f["depends_on_user_memory"] for f in flags),
        "bad_status": sum(s.status != 200 for s in sent),
        "not_canned": sum(not s.canned for s in sent),
    }


def label_agreement(mode: Mode, dialogues: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    """Return how often the stand-in's flags on the final messages match the labels:
    (history right, memory right, matched requests, history needed but left out)."""
    tasks, _ = split(mode.reported_final)
    hist = mem = found = dropped = 0
    for d in dialogues:
        line = f"New message: {inert(d['message'])}"
        request = next((t["last_user"] for t in tasks if t["last_user"].endswith(line)), None)
        if request is None:
            continue
        found += 1
        flags = extract_request_task(request)
        hist += flags["depends_on_chat_history"] == d["expected"]["depends_on_chat_history"]
        mem += flags["depends_on_user_memory"] == d["expected"]["depends_on_user_memory"]
        dropped += d["expected"]["depends_on_chat_history"] and not flags["depends_on_chat_history"]
    return hist, mem, found, dropped


def report(on: Mode, off: Mode, args: argparse.Namespace, dialogues: list[dict[str, Any]]) -> None:
    """Print the figures of both modes and their differences."""
    prices = parse_prices(args.prices)
    missing: set[str] = set()
    for final_only, title in ((True, "final messages (the labelled ones)"), (False, "all messages")):
        a, b = figures(on, final_only, prices, missing), figures(off, final_only, prices, missing)
        print(f"{title}: {a['n']} per mode")
        for m, f in (("on ", a), ("off", b)):
            print(f"  {m}: reply time p50 {f['p50']:.0f} ms  p99 {f['p99']:.0f} ms  (mean {f['mean_ms']:.0f}); "
                  f"model calls: {f['replies']} replies, {f['tasks']} task; non-200: {f['bad_status']}, "
                  f"replies not from the model: {f['not_canned']}")
        print(f"  added latency on - off: p50 {a['p50'] - b['p50']:+.0f} ms  p99 {a['p99'] - b['p99']:+.0f} ms")
        print(f"  reply prompt tokens per message: on {a['reply_prompt']:.1f}, off {b['reply_prompt']:.1f}; "
              f"saved on vs off {b['reply_prompt'] - a['reply_prompt']:.1f} "
              f"({100 * (b['reply_prompt'] - a['reply_prompt']) / max(1e-9, b['reply_prompt']):.1f} %)")
        print(f"  task tokens per message (on): prompt {a['task_prompt']:.1f} + completion "
              f"{a['task_completion']:.1f} = {a['task_prompt'] + a['task_completion']:.1f}; reply completion "
              f"tokens per message: on {a['reply_completion']:.1f}, off {b['reply_completion']:.1f}")
        print(f"  model cost per 1,000 messages ({args.reply_model} replies, {args.task_model} task): "
              f"on ${a['cost_1k']:.4f} (replies ${a['reply_cost_1k']:.4f} + task ${a['task_cost_1k']:.4f}), "
              f"off ${b['cost_1k']:.4f}; on - off {a['cost_1k'] - b['cost_1k']:+.4f} "
              f"({100 * (a['cost_1k'] - b['cost_1k']) / max(1e-9, b['cost_1k']):+.1f} %)")
        t = max(1, a["tasks"])
        print(f"  on, left out of the reply prompt (task answers' flags, recomputed): history "
              f"{a['no_history']}/{a['tasks']} ({100 * a['no_history'] / t:.0f} %), memory "
              f"{a['no_memory']}/{a['tasks']} ({100 * a['no_memory'] / t:.0f} %), both {a['neither']}/{a['tasks']} "
              f"({100 * a['neither'] / t:.0f} %)")
    metric = ", ".join(f"{k} {v:.0f}" for k, v in on.tasks_metric.items())
    metric_off = ", ".join(f"{k} {v:.0f}" for k, v in off.tasks_metric.items())
    print(f"bot_tasks_total during the run: on: {metric}; off: {metric_off}")
    hist, mem, found, dropped = label_agreement(on, dialogues)
    print(f"stand-in flags vs the labels, final messages: history {hist}/{found}, memory {mem}/{found}; "
          f"history needed by the label but left out: {dropped}")
    if missing:
        print(f"(no price for model(s) {', '.join(sorted(missing))}: counted as free)")


def main() -> int:
    """Run both modes and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=300.0, help="the stand-in's latency per call")
    parser.add_argument("--prices", default=DEFAULT_PRICES, help="MODEL_PRICES JSON: {model: [in, out] USD per 1M}")
    parser.add_argument("--reply-model", default="gpt-4o", help="OPENAI_MODEL")
    parser.add_argument("--task-model", default="gpt-4o-mini", help="TASK_MODEL")
    parser.add_argument("--workers", type=int, default=4, help="dialogues in flight at once")
    args = parser.parse_args()
    started = time.perf_counter()
    configure_logging("WARNING", False)
    dialogues = json.loads(DATA.read_text(encoding="utf-8"))["dialogues"]
    total = sum(len(d["recent"]) + 1 for d in dialogues)
    with tempfile.TemporaryDirectory() as tmp:
        embedded = start_embedded_redis(Path(tmp) / "bench.db")
        model = StandinModel(latency_s=args.latency_ms / 1000).start()
        try:
            modes = {m: run_mode(m, args, embedded.url, model, dialogues) for m in ("on", "off")}
        finally:
            model.stop()
            embedded.stop()
    on, off = modes["on"], modes["off"]
    print(f"Task extraction on vs off: {len(dialogues)} dialogues of bot/dev/eval_data/tasks.json, {total} "
          f"messages per mode ({len(dialogues)} final), {args.workers} dialogues at a time, stand-in latency "
          f"{args.latency_ms:.0f} ms per call, embedded Redis, Flask test client")
    print(f"  seeded per mode: {on.seeded['facts']} facts, {on.seeded['entities']} entities, "
          f"{on.seeded['summaries']} summaries; send time: on {on.wall_s:.1f} s, off {off.wall_s:.1f} s")
    report(on, off, args, dialogues)
    print(f"(run time {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
