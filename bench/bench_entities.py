"""Measure entity matching (docs/entities.md): time per message, pass 2's background cost, Redis bytes.

Prints figures; asserts nothing. Three parts, each on the real code:

1. Matching and retrieval per message, on one core, for users with 10, 100 and 1,000
   entities (PERSON, PET, PLACE, ORG, PRODUCT names of 1-3 words, some with aliases, each
   mentioning 1-3 of the user's 50 facts): `EntityIndex.match` with the index built once
   per user (as IndexCache keeps it per process; its build time is reported apart), then
   `select_memory` with the matches, over 2,000 WhatsApp-style messages of 5-30 words, half
   naming one or two of the user's entities (as written, in lower case, with a one-letter
   typo, or with a possessive "'s"), half naming none; half of all start with a capital, as
   phone keyboards write the first word. Also printed: how often each way of writing a name
   was found, and how often a message naming none matched one.
2. Pass 2's background cost per message: 200 messages of 20 users committed with the claim
   and commit scripts, then fact extraction and pass 2 run for each as workers/jobs.py runs
   them (one extraction per message: EXTRACTION_IDLE_S=0, the most calls), against the model
   stand-in over HTTP and a private embedded Redis; model requests counted by purpose.
3. Redis bytes of a user with 50 facts that name things and the entities in them, stored
   through FactStore.merge and EntityStore.update (MEMORY USAGE).

    .venv/bin/python bench/bench_entities.py
"""

from __future__ import annotations

import random
import string
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path

from rapidfuzz import fuzz, process

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import pct  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.dev.standin import StandinModel  # noqa: E402
from bot.llm.tokens import TokenCounter  # noqa: E402
from bot.memory.entities import Mention, absorb, relate  # noqa: E402
from bot.memory.entity_extraction import EntityRules, read_entities, user_facts  # noqa: E402
from bot.memory.extraction import extract_facts, unread_pairs  # noqa: E402
from bot.memory.matching import EntityIndex  # noqa: E402
from bot.memory.names import entity_key  # noqa: E402
from bot.memory.rules import FactRules, merge_facts  # noqa: E402
from bot.memory.selection import select_memory  # noqa: E402
from bot.observability.logs import configure_logging  # noqa: E402
from bot.services import Services, build_services  # noqa: E402
from bot.storage.entities import Entity, EntityState, fact_hash  # noqa: E402
from bot.storage.keys import ENTITIES_PREFIX, FACTS_PREFIX, user_key  # noqa: E402
from bot.storage.context import CommitRecord
from bot.storage.records import Fact, Pair, as_int, text  # noqa: E402
from bot.storage.triggers import ENTITIES, EXTRACTION  # noqa: E402

SIZES = (10, 100, 1_000)
MESSAGES = 2_000
FACTS = 50
BUILDS = 5
USERS = 20
PER_USER = 10  # 200 messages in all
ENTITY_MARK = "Known entities:"  # only pass-2 requests carry it (render_entity_request)
FACTS_MARK = "Known facts:"  # only fact extraction requests (render_request)

FIRST = ("Ana Maria João Pedro Rita Lucas Sofia Tiago Inês Miguel Carla Bruno Marta Diego Elena Farah Hiro Ivan "
         "Julia Kofi Leila Mateo Nadia Omar Priya Rosa Samir Tomas Vera Wen Yara Zoe Beatriz Gustavo Helena").split()
LAST = ("Silva Costa Pereira Santos Oliveira Ferreira Almeida Rocha Gomes Martins Lopes Moreira Nunes Ribeiro "
        "Carvalho Teixeira Mendes Cardoso Pinto Correia Novak Tanaka Okafor Haddad Schmidt Rossi Dubois").split()
PETS = "Rex Luna Bolt Mimi Toby Nala Simba Milo Kiwi Pipoca Thor Zeus Bidu Fifi Loki Oreo Nino Pluto Bolinha".split()
PLACES = [*"Porto Lisbon Braga Coimbra Faro Madrid Berlin Paris London Tokyo Recife Curitiba Lagos Nairobi".split(),
          "São Paulo", "Rio de Janeiro", "New York", "Vila Nova de Gaia", "Buenos Aires", "Cabo Verde"]
ORGS = ["Google", "Acme Corp", "Banco Azul", "Hospital Santa Maria", "Nova Labs", "FC Porto", "Blue Harbor Bank",
        "Uni Lisboa", "VetPlus", "Fitness Hut", "Sonae", "Deloitte"]
PRODUCTS = ["Kindle", "iPhone 15", "Galaxy S23", "MacBook Air", "Tesla Model 3", "PlayStation 5", "Apple Watch",
            "ThinkPad X1", "Fiat Panda", "Switch OLED"]
TYPES = ("PERSON", "PET", "PLACE", "ORG", "PRODUCT")
SYLLABLES = "ra lo mi ta ne ko zu bel dor fin gar lin mar nor pel ros sal tor val wen ka ri su ve dan".split()
FILLER = ("hey lol ok so yeah tomorrow maybe we should go out for dinner tonight can you help me with this thing "
          "idk what to do about the weekend plans haha thanks btw did see news today need ideas gift pls just "
          "saw it rn omg really good morning going later call you soon kkk sure np").split()
CATEGORIES = ("identity", "location", "preference", "diet", "health", "work", "family", "schedule")


# -- part 1: matching and retrieval ------------------------------------------------------------


def coin(rng: random.Random) -> str:
    """Return a made-up, pronounceable word: names beyond the pools, for the big users; never
    one within fuzzy reach of the chat words ("Lolo" would match every "lol")."""
    while True:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if not process.extractOne(word.lower(), FILLER, scorer=fuzz.ratio, score_cutoff=80):
            return word


def pick(rng: random.Random, pool: list[str], fresh: float) -> str:
    """Return a pool name, or with probability `fresh` a made-up one."""
    return coin(rng) if rng.random() < fresh else rng.choice(pool)


def make_name(etype: str, rng: random.Random, fresh: float) -> str:
    """Return a name of 1-3 words for an entity of this type."""
    words = rng.choices((1, 2, 3), weights=(5, 4, 1))[0]
    if etype == "PERSON":
        parts = [pick(rng, FIRST, fresh)] + [pick(rng, LAST, fresh) for _ in range(words - 1)]
        return " ".join(parts)
    if etype == "PET":
        return pick(rng, PETS, fresh) if words == 1 else f"{rng.choice(('Sir', 'Dona', 'Little'))} {pick(rng, PETS, fresh)}"
    if etype == "PLACE":
        if rng.random() > fresh:
            return rng.choice(PLACES)
        return {1: coin(rng), 2: f"Vila {coin(rng)}", 3: f"{coin(rng)} do {coin(rng)}"}[words]
    if etype == "ORG":
        if rng.random() > fresh:
            return rng.choice(ORGS)
        return {1: coin(rng), 2: f"{coin(rng)} {rng.choice(('Corp', 'Labs', 'Bank', 'Clinic'))}",
                3: f"Banco {coin(rng)} {coin(rng)}"}[words]
    if rng.random() > fresh:
        return rng.choice(PRODUCTS)
    return {1: coin(rng), 2: f"{coin(rng)} {rng.choice(('Pro', 'Max', 'X2', '15'))}",
            3: f"{coin(rng)} {coin(rng)} {rng.randint(2, 9)}"}[words]


def make_aliases(name: str, rng: random.Random) -> list[str]:
    """Return 1-2 other names a user calls this by: a first word, initials, a nickname."""
    words = name.split()
    options = [words[0] + rng.choice(("y", "inho", "zinha", "ie"))]
    if len(words) > 1:
        options += [words[0], "".join(w[0] for w in words).upper()]
    return rng.sample(options, min(len(options), rng.randint(1, 2)))


def make_facts(rng: random.Random) -> dict[str, Fact]:
    """Return 50 facts of one user, values of 5-30 characters."""
    bases = ("dog_name", "sister", "employer", "city", "hometown", "phone", "car", "friend", "boss", "gym",
             "likes", "trip", "school", "partner", "doctor", "team", "bank", "laptop", "mother", "cousin")
    facts = {}
    for i in range(FACTS):
        key = bases[i % len(bases)] + ("" if i < len(bases) else f"_{i // len(bases) + 1}")
        value = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 5))).capitalize()[:30]
        if len(value) < 5:
            value += " noted"
        facts[key] = Fact(key, value, rng.choice(CATEGORIES), round(rng.uniform(0.6, 1.0), 3),
                          round(rng.uniform(0.3, 0.9), 3))
    return facts


def make_entities(size: int, facts: dict[str, Fact], rng: random.Random) -> dict[str, Entity]:
    """Return `size` entities of distinct keys, 40 % with aliases, each mentioning 1-3 facts,
    with their RELATED edges."""
    fresh = min(0.9, size / 120)  # the pools suffice for small users; big ones need made-up names
    entities: dict[str, Entity] = {}
    keys = list(facts)
    while len(entities) < size:
        etype = rng.choice(TYPES)
        name = make_name(etype, rng, fresh)
        key = entity_key(etype, name)
        if key in entities:
            continue
        aliases = make_aliases(name, rng) if rng.random() < 0.4 else []
        entities[key] = Entity(key, name, etype, aliases, round(rng.uniform(0.6, 1.0), 2),
                               rng.sample(keys, rng.randint(1, 3)))
    relate(entities)
    return entities


def typo(name: str, rng: random.Random) -> str:
    """Return the name with a one-letter typo (dropped, doubled or changed) in its longest word."""
    words = name.split()
    at = max(range(len(words)), key=lambda i: len(words[i]))
    word = words[at]
    if len(word) < 3:
        return name
    i = rng.randint(1, len(word) - 1)  # the first letter stays: it is what people get right
    kind = rng.choice(("drop", "double", "change"))
    if kind == "drop":
        word = word[:i] + word[i + 1:]
    elif kind == "double":
        word = word[:i] + word[i] + word[i:]
    else:
        word = word[:i] + rng.choice([c for c in string.ascii_lowercase if c != word[i].lower()]) + word[i + 1:]
    words[at] = word
    return " ".join(words)


VARIANTS = ("exact", "lowercase", "typo", "possessive")


def make_messages(entities: dict[str, Entity], rng: random.Random) -> list[tuple[str, list[tuple[str, str]]]]:
    """Return (message, [(entity key, variant)]) pairs: half name one or two entities; half
    start with a capital, as phone keyboards write the first word."""
    keys = list(entities)
    out = []
    for i in range(MESSAGES):
        words = [rng.choice(FILLER) for _ in range(rng.randint(5, 30))]
        named: list[tuple[str, str]] = []
        if i % 2 == 0:
            picked = rng.sample(keys, min(len(keys), rng.randint(1, 2)))
            # Distinct places in the chat words: two names never stand side by side, which
            # would read as one longer name.
            places = sorted(rng.sample(range(len(words) + 1), len(picked)), reverse=True)
            for key, at in zip(picked, places):
                entity = entities[key]
                name = rng.choice(entity.names()) if entity.aliases and rng.random() < 0.3 else entity.name
                variant = rng.choice(VARIANTS)
                said = {"exact": name, "lowercase": name.lower(), "typo": typo(name, rng),
                        "possessive": name + "'s"}[variant]
                words[at:at] = [said]
                named.append((key, variant))
        message = " ".join(words)
        if rng.random() < 0.5:
            message = message[:1].upper() + message[1:]
        out.append((message + rng.choice(("", "", "?", "!", " 😂", "...")), named))
    return out


def matching(rng: random.Random) -> None:
    """Print matching and retrieval time per message by user size."""
    counter = TokenCounter("gpt-4o-mini")
    print(f"1. Matching + retrieval per message, one core, {MESSAGES} messages per user size "
          f"(half naming 1-2 entities), {FACTS} facts, MEMORY_MAX_TOKENS 200")
    for size in SIZES:
        facts = make_facts(rng)
        entities = make_entities(size, facts, rng)
        messages = make_messages(entities, rng)
        builds = []
        for _ in range(BUILDS):
            t0 = time.perf_counter()
            index = EntityIndex(entities.values())
            builds.append((time.perf_counter() - t0) * 1000)
        scoped = {"user": facts}
        for message, _ in messages[:50]:  # warm up: the token encoder, rapidfuzz
            select_memory(scoped, message, counter, threshold=0.7, conflict_margin=0.1, max_tokens=200,
                          matches=index.match(message, threshold=0.85), entities=index.entities, related_weight=0.75)
        match_ms, select_ms, both_ms = [], [], []
        found = {v: [0, 0] for v in VARIANTS}
        lower_by_start = {True: [0, 0], False: [0, 0]}  # lowercase names, by the message's first letter
        false_hits = 0
        entity_picked = 0
        for message, named in messages:
            t0 = time.perf_counter()
            matches = index.match(message, threshold=0.85)
            t1 = time.perf_counter()
            chosen = select_memory(scoped, message, counter, threshold=0.7, conflict_margin=0.1, max_tokens=200,
                                   matches=matches, entities=index.entities, related_weight=0.75)
            t2 = time.perf_counter()
            match_ms.append((t1 - t0) * 1000)
            select_ms.append((t2 - t1) * 1000)
            both_ms.append((t2 - t0) * 1000)
            hit = {m.key for m in matches}
            for key, variant in named:
                found[variant][0] += key in hit
                found[variant][1] += 1
                if variant == "lowercase":
                    lower_by_start[message[:1].isupper()][0] += key in hit
                    lower_by_start[message[:1].isupper()][1] += 1
            false_hits += not named and bool(matches)
            entity_picked += any(s.why.startswith("entity") for s in chosen.selected)
        names = sum(len(e.names()) for e in entities.values())
        recall = ", ".join(f"{v} {100 * n / max(1, d):.0f} %" for v, (n, d) in found.items())
        print(f"  {size:>5} entities ({names} names with aliases): index build p50 {pct(builds, 50):.2f} ms")
        print(f"        match     p50 {pct(match_ms, 50):.3f} ms  p99 {pct(match_ms, 99):.3f} ms")
        print(f"        retrieval p50 {pct(select_ms, 50):.3f} ms  p99 {pct(select_ms, 99):.3f} ms")
        print(f"        both      p50 {pct(both_ms, 50):.3f} ms  p99 {pct(both_ms, 99):.3f} ms")
        print(f"        named entity found: {recall}; messages naming none that matched one: "
              f"{100 * false_hits / (MESSAGES // 2):.1f} %; blocks with an entity-picked fact: "
              f"{100 * entity_picked / MESSAGES:.0f} %")
        (cap, cap_n), (low, low_n) = lower_by_start[True], lower_by_start[False]
        print(f"        lowercase names found when the message starts with a capital: {100 * cap / max(1, cap_n):.0f} %"
              f" (of {cap_n}); otherwise: {100 * low / max(1, low_n):.0f} % (of {low_n})")


# -- part 2: pass 2 per message ----------------------------------------------------------------


def user_script(rng: random.Random) -> list[str]:
    """Return one user's 10 messages: first-person statements the stand-in extracts facts from
    (some repeated or changed), statements about others and chat with no facts."""
    first, city, pet = rng.choice(FIRST), rng.choice(PLACES), rng.choice(PETS)
    facts = [
        f"My name is {first} and I live in {city}.",
        f"I have a dog named {pet}.",
        f"I work at {rng.choice(ORGS)}.",
        f"I love {rng.choice(('Star Wars', 'hiking', 'FC Porto', 'Harry Potter', 'jazz'))}.",
        f"I'm originally from {rng.choice(PLACES)}.",
        f"I have a cat called {rng.choice(PETS)}",
        f"I moved to {rng.choice(PLACES)}.",
        "I'm allergic to peanuts.",
        f"I work as a nurse at {rng.choice(ORGS)}",
        f"I have a dog named {pet}.",  # said again: a duplicate, no change
        "I'm vegetarian",
    ]
    others = [
        f"My sister {rng.choice(FIRST)} works at {rng.choice(ORGS)}.",
        "lol ok thanks",
        "can you suggest a recipe for dinner?",
        "what's the weather like tomorrow?",
        f"is {pet} ok to eat grapes?",
        "haha that's funny 😂",
    ]
    picked = facts[:2] + rng.sample(facts[2:], 4) + rng.sample(others, 4)
    return picked[:2] + rng.sample(picked[2:], len(picked) - 2)


def extract_then_pass2(s: Services, user: str, counts: dict[str, int], pass2_ms: list[float]) -> None:
    """Run fact extraction, then pass 2 if it changed facts, as workers/jobs.py does."""
    settings = s.settings
    token = s.store.take_trigger(user, EXTRACTION)
    meta = s.meta.meta(user)
    pairs = unread_pairs(s.store, user, as_int(meta.get("extracted_seq"), "extracted_seq"),
                         limit=settings.EXTRACTION_MAX_PAIRS)
    result = extract_facts(user, pairs, s.facts, s.llm, s.prompts.extraction, model=settings.extraction_model,
                           rules=FactRules.from_settings(settings), now=time.time(), token=token)
    counts["extractions"] += 1
    if result.status == "nothing_new":
        s.store.release_trigger(user, EXTRACTION, token)
    if not (result.status == "stored" and result.stats.changed and settings.ENTITIES_ENABLED):
        return
    counts["changed"] += 1
    while True:  # extract_user_entities, and its follow-up while facts are left unread
        token = s.store.take_trigger(user, ENTITIES)
        t0 = time.perf_counter()
        done = read_entities(user, token, s.facts, s.entities, s.llm, s.prompts.entities,
                             model=settings.entity_model, rules=EntityRules.from_settings(settings))
        pass2_ms.append((time.perf_counter() - t0) * 1000)
        counts["pass2_runs"] += 1
        if done.status == "nothing_new":
            s.store.release_trigger(user, ENTITIES, token)
        changed, gone = s.entities.load(user).unread(user_facts(s.facts, user), s.prompts.entities.version)
        if not (done.status == "stored" and (done.left or changed or gone)):
            break


def pass2(s: Services, model: StandinModel, rng: random.Random) -> None:
    """Print pass 2's model calls and tokens per message."""
    counter = TokenCounter("gpt-4o-mini")
    users = [f"+1555{rng.randint(0, 9_999_999):07d}" for _ in range(USERS)]
    scripts = {user: user_script(rng) for user in users}
    counts = {"extractions": 0, "changed": 0, "pass2_runs": 0}
    pass2_ms: list[float] = []
    now = time.time()
    for turn in range(PER_USER):
        for user in users:
            sid = "SM" + uuid.uuid4().hex
            claim = s.store.claim(user, sid, now=now + turn)
            pair = Pair(user=scripts[user][turn], assistant="x" * 240, ts=now + turn, sid=sid)
            s.store.commit(CommitRecord(user, claim, sid, pair.assistant, pair), now=now + turn)
            extract_then_pass2(s, user, counts, pass2_ms)
    messages = USERS * PER_USER
    by_purpose: dict[str, list[tuple[int, int]]] = {"pass2": [], "extraction": [], "other": []}
    for body in model.requests():
        last = str(body["messages"][-1].get("content", ""))
        purpose = "pass2" if ENTITY_MARK in last else "extraction" if FACTS_MARK in last else "other"
        prompt = counter.count_messages(body["messages"])
        # The stand-in records requests, not answers; unscripted, its answer is canned_json(body).
        completion = counter.count(StandinModel.canned_json(body))
        by_purpose[purpose].append((prompt, completion))
    calls = by_purpose["pass2"]
    extraction = by_purpose["extraction"]
    system = counter.message_cost("system", s.prompts.entities.text)
    entities = [len(s.entities.load(u).entities) for u in users]
    print(f"2. Pass 2 per message: {messages} messages of {USERS} users, one fact extraction per message "
          f"(EXTRACTION_IDLE_S=0, the most calls), stand-in model, embedded Redis")
    print(f"  fact extractions: {counts['extractions']}, of which changed facts: {counts['changed']}; "
          f"pass-2 runs: {counts['pass2_runs']}, pass-2 model calls: {len(calls)}")
    print(f"  pass-2 calls per message: {len(calls) / messages:.3f}")
    print(f"  pass-2 calls per extraction that changed facts: {len(calls) / max(1, counts['changed']):.3f}")
    print(f"  pass-2 prompt tokens per message: {sum(p for p, _ in calls) / messages:.1f} "
          f"(per call p50 {pct([p for p, _ in calls], 50):.0f}, max {max((p for p, _ in calls), default=0)}; "
          f"the system prompt alone: {system})")
    print(f"  pass-2 completion tokens per message: {sum(c for _, c in calls) / messages:.1f} "
          f"(the stand-in's answers, recomputed with canned_json; a real model's may differ)")
    print(f"  for scale, fact extraction: {len(extraction) / messages:.2f} calls, "
          f"{sum(p for p, _ in extraction) / messages:.1f} prompt and {sum(c for _, c in extraction) / messages:.1f} "
          f"completion tokens per message; other requests: {len(by_purpose['other'])}")
    print(f"  pass-2 run wall time (Redis + HTTP to the stand-in) p50 {pct(pass2_ms, 50):.1f} ms, "
          f"p99 {pct(pass2_ms, 99):.1f} ms; entities per user at the end: p50 {pct(entities, 50):.0f}, "
          f"max {max(entities)}")


# -- part 3: Redis bytes -----------------------------------------------------------------------

#: (key, category, value template); slots are filled with the user's named things.
TEMPLATES = [
    ("dog_name", "family", "dog named {PET}"),
    ("cat_name", "family", "cat called {PET}"),
    ("employer", "work", "works at {ORG}"),
    ("sister", "family", "sister {PERSON} lives in {PLACE}"),
    ("brother", "family", "brother {PERSON}"),
    ("best_friend", "family", "best friend {PERSON}"),
    ("city", "location", "lives in {PLACE}"),
    ("hometown", "location", "grew up in {PLACE}"),
    ("phone", "preference", "uses an {PRODUCT}"),
    ("car", "preference", "drives a {PRODUCT}"),
    ("gym", "schedule", "trains at {ORG} on Mondays"),
    ("boss", "work", "boss is {PERSON}"),
    ("partner", "family", "partner {PERSON}"),
    ("dog_vet", "family", "{PET} sees Dr. {LAST}"),
    ("school", "work", "studied at {ORG}"),
    ("next_trip", "schedule", "trip to {PLACE} in May"),
    ("bank", "other", "banks with {ORG}"),
    ("laptop", "work", "laptop is a {PRODUCT}"),
    ("friend", "family", "friend {PERSON} from {ORG}"),
    ("mother", "family", "mother {PERSON} in {PLACE}"),
    ("team", "preference", "supports {ORG}"),
    ("coworker", "work", "coworker {PERSON}"),
]
POOLS = {"PERSON": None, "PET": PETS, "PLACE": PLACES, "ORG": ORGS, "PRODUCT": PRODUCTS}


def named_facts(rng: random.Random) -> tuple[list[Fact], list[Mention]]:
    """Return 50 facts (values of 5-30 characters naming things) and a mention of every named
    thing in them; a thing is named again in another fact a third of the time."""
    known: dict[str, list[str]] = {t: [] for t in POOLS}
    facts: list[Fact] = []
    mentions: list[Mention] = []
    used: dict[str, int] = {}
    seen: set[str] = set()
    while len(facts) < FACTS:
        base, category, template = rng.choice(TEMPLATES)
        values: dict[str, str] = {}
        said: list[tuple[str, str]] = []
        for slot in ("PERSON", "PET", "PLACE", "ORG", "PRODUCT", "LAST"):
            if "{" + slot + "}" not in template:
                continue
            if slot == "LAST":
                name = rng.choice(LAST)
                values[slot] = name
                said.append((f"Dr. {name}", "PERSON"))
                continue
            if known[slot] and rng.random() < 0.33:
                name = rng.choice(known[slot])
            elif slot == "PERSON":
                name = rng.choice(FIRST) + (f" {rng.choice(LAST)}" if rng.random() < 0.4 else "")
            else:
                name = rng.choice(POOLS[slot])  # type: ignore[arg-type]
            values[slot] = name
            said.append((name, slot))
        value = template.format(**values)
        if not 5 <= len(value) <= 30 or value in seen:  # the same value twice is one fact (merge_facts)
            continue
        seen.add(value)
        used[base] = used.get(base, 0) + 1
        key = base if used[base] == 1 else f"{base}_{used[base]}"
        for name, etype in said:
            if name not in known.get(etype, []):
                known.setdefault(etype, []).append(name)
            mentions.append(Mention(name, etype, facts=(key,), aliases=(), confidence=0.9))
        facts.append(Fact(key=key, value=value, category=category, confidence=round(rng.uniform(0.7, 1.0), 3),
                          importance=round(rng.uniform(0.3, 0.9), 3), provenance=f"#{rng.randint(1, 200)}"))
    return facts, mentions


def redis_bytes(s: Services, rng: random.Random) -> None:
    """Print the bytes of a user's facts and of their entities."""
    user = f"+1555{rng.randint(0, 9_999_999):07d}"
    incoming, mentions = named_facts(rng)
    rules = EntityRules.from_settings(s.settings)
    s.facts.merge(user, "user", lambda existing: merge_facts(
        existing, incoming, threshold=0.7, max_facts=FACTS, conflict_margin=0.1, now=time.time()))
    stored = s.facts.load(user, "user")
    token = s.store.take_trigger(user, ENTITIES)

    def change(now: EntityState) -> EntityState:
        merged, _ = absorb(now.entities, mentions, list(stored), similarity=rules.merge_similarity,
                           min_confidence=rules.min_confidence, max_entities=rules.max_entities)
        return EntityState(entities=merged, read={fact_hash(f) for f in stored.values()}, prompt_version="1")

    state = s.entities.update(user, token, change)
    client = s.redis
    facts_key, entities_key = user_key(FACTS_PREFIX, user), user_key(ENTITIES_PREFIX, user)
    facts_b = client.memory_usage(facts_key, samples=0) or 0
    entities_b = client.memory_usage(entities_key, samples=0) or 0
    count = len(state.entities) if state else 0
    stored_text = text(client.get(entities_key))
    lines = stored_text.splitlines()
    entity_payload = sum(len(line.encode()) + 1 for line in lines[1:] if not line.startswith("#"))
    read_payload = sum(len(line.encode()) for line in lines if line.startswith("#"))
    print(f"3. Redis bytes of a user with {len(stored)} facts naming things and their entities (MEMORY USAGE)")
    print(f"  {facts_key.split(':')[0]}: {facts_b} B ({text(client.object('encoding', facts_key))}); "
          f"{entities_key.split(':')[0]}: {entities_b} B (one string of {len(stored_text)} B; "
          f"Redis {client.info('server')['redis_version']})")
    print(f"  entities / facts: {100 * entities_b / max(1, facts_b):.0f} % (target: <= 40 %)")
    print(f"  {count} entities from {len(mentions)} mentions: {entities_b / max(1, count):.0f} B per entity "
          f"(the key's bytes over its entities, the read-facts cache included); payload: entities "
          f"{entity_payload} B, read-facts cache {read_payload} B")


def main() -> int:
    """Print the three parts' figures."""
    rng = random.Random(12)
    started = time.perf_counter()
    configure_logging("WARNING", False)  # the domain functions log each run at INFO
    # The figures depend on the core: this says how fast this one is, for comparing runs.
    calibration = min(timeit.repeat("sum(range(10**6))", number=5, repeat=5)) / 5 * 1000
    print(f"0. This core: sum(range(10**6)) takes {calibration:.1f} ms (as python -m timeit measures it)")
    matching(rng)
    with tempfile.TemporaryDirectory() as tmp:
        embedded = start_embedded_redis(Path(tmp) / "bench.db")
        model = StandinModel().start()
        services = None
        try:
            settings = Settings(
                _env_file=None,  # type: ignore[call-arg]
                REDIS_URL=embedded.url,
                REDIS_CLUSTER=False,
                OPENAI_BASE_URL=model.url,  # already ends in /v1
                OPENAI_API_KEY="x",
                PSEUDONYM_SECRET="bench",
                EXTRACTION_IDLE_S=0,
                LLM_MAX_RETRIES=0,
                LOG_LEVEL="WARNING",
            )
            services = build_services(settings)
            pass2(services, model, rng)
            redis_bytes(services, rng)
        finally:
            if services is not None:
                services.redis.close()
                services.jobs.connection.close()
            model.stop()
            embedded.stop()
    print(f"(run time {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
