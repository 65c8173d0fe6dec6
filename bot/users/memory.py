"""What operators do to one user's facts, and to the org's; the CLI and the admin API share it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import structlog

from bot.config import Settings
from bot.exceptions import LLMUnavailable
from bot.llm.tokens import TokenCounter
from bot.memory.rules import CATEGORIES, category_for, merge_facts, normalize_key
from bot.memory.selection import MemorySelection, select_memory
from bot.memory.vectors import FactVectors
from bot.observability.logs import mask_phone
from bot.storage.facts import FactStore
from bot.storage.records import Fact, as_int
from bot.users.data import UserData
from bot.users.entities import recall

log = structlog.get_logger(__name__)

SCOPES = ("user", "session")


class OperationError(ValueError):
    """A request an operator made that cannot be carried out as asked."""


def set_fact(
    data: UserData,
    settings: Settings,
    user: str,
    key: str,
    value: str,
    *,
    category: str | None = None,
    importance: float = 0.8,
    scope: str = "user",
    actor: str = "operator",
) -> Fact:
    """Store an operator-given fact; it outranks anything extracted automatically."""
    if scope not in SCOPES:
        raise OperationError(f"scope must be one of {', '.join(SCOPES)}")
    normalized = normalize_key(key)
    category = category or category_for(normalized)  # as an extracted fact would be filed
    if category not in CATEGORIES:
        raise OperationError(f"category must be one of {', '.join(CATEGORIES)}")
    if not value.strip() or len(value) > 300:
        raise OperationError("value must be 1 to 300 characters")
    if not isinstance(importance, (int, float)) or isinstance(importance, bool) or not 0 <= importance <= 1:
        raise OperationError("importance must be a number between 0 and 1")
    fact = Fact(
        key=normalized,
        value=value.strip(),
        category=category,
        confidence=1.0,
        importance=importance,
        source="operator",
        provenance=actor,
    )
    s = settings
    data.facts.merge(
        user,
        scope,
        lambda existing: merge_facts(
            existing,
            [fact],
            threshold=0.0,
            max_facts=s.MAX_FACTS_PER_USER,
            conflict_margin=s.CONFLICT_MARGIN,
            now=time.time(),
        ),
        count_stats=False,  # the stats count extraction, not operators
    )
    stored = data.facts.load(user, scope).get(fact.key)
    if stored is None:
        raise OperationError(
            f"not stored: the user already has {s.MAX_FACTS_PER_USER} operator or explicit facts; delete one first"
        )
    if key != fact.key and data.facts.delete(user, key, scope):
        # The fact was stored under a key that a newer synonym folds (home_city is city now):
        # the edit moves it to the canonical key instead of leaving the old one beside it.
        log.info("audit.fact_rekeyed", actor=actor, target=mask_phone(user), old_key=key, key=fact.key)
    log.info("audit.fact_set", actor=actor, target=mask_phone(user), key=fact.key, scope=scope)
    return stored


def delete_fact(data: UserData, user: str, key: str, scope: str = "user", actor: str = "operator") -> bool:
    """Delete one fact, by its key as stored if there is one (a key stored before a synonym
    folded it), else by the canonical key; return whether it existed."""
    existed = data.facts.delete(user, key, scope)
    if not existed and normalize_key(key) != key:
        key = normalize_key(key)
        existed = data.facts.delete(user, key, scope)
    log.info("audit.fact_deleted", actor=actor, target=mask_phone(user), key=key, existed=existed)
    return existed


def scoped_facts(facts: FactStore, user: str) -> dict[str, dict[str, Fact]]:
    """Return the user's facts by scope, with the org's."""
    return {
        "session": facts.load(user, "session"),
        "user": facts.load(user, "user"),
        "org": facts.org_facts(),
    }


def preview_selection(
    data: UserData,
    settings: Settings,
    counter: TokenCounter,
    user: str,
    request: str,
    max_tokens: int | None = None,
) -> MemorySelection:
    """Return the memory block the bot would inject for this message, entities matched first,
    then by meaning as the message path picks (words alone when the model fails)."""
    s = settings
    found = recall(data, settings, user, request)
    scoped = scoped_facts(data.facts, user)
    categories = {k: f.category for k, f in scoped["user"].items()}
    return select_memory(
        scoped,
        request,
        counter,
        threshold=s.EXTRACTION_CONFIDENCE,
        conflict_margin=s.CONFLICT_MARGIN,
        max_tokens=max_tokens or s.MEMORY_MAX_TOKENS,
        matches=found.matches,
        entities=found.entities,
        related_weight=s.ENTITY_RELATED_WEIGHT,
        similarity=similarity_to(data, user, request, categories, s.EMBEDDING_DEADLINE_S),
    )


def similarity_to(
    data: UserData, user: str, message: str, categories: dict[str, str], deadline_s: float
) -> dict[str, float] | None:
    """Return each of the user's facts' similarity to a message (`categories`: each fact's, by
    key), or None (no vectors, or the model failed: the cue words serve)."""
    vectors = data.facts.vectors
    if not isinstance(vectors, FactVectors):
        return None
    try:
        query = vectors.embedder.query(message, deadline_s=deadline_s, purpose="preview")
    except LLMUnavailable:
        return None
    return vectors.similarities(query, data.facts.load_vectors(user), categories) or None


def selection_report(selection: MemorySelection) -> dict[str, Any]:
    """Return a selection as JSON-ready data."""
    return {
        "block": selection.block,
        "tokens": selection.tokens,
        "entities": [m.to_public() | {"why": m.explain()} for m in selection.matches],
        "selected": [item.to_public() for item in selection.selected],
        "dropped": [{"key": key, "reason": reason} for key, reason in selection.dropped],
    }


def conflicts(data: UserData, user: str) -> list[dict[str, Any]]:
    """Return the facts holding a rival value, with both values."""
    out = []
    for scope in SCOPES:
        for fact in data.facts.load(user, scope).values():
            if fact.conflict:
                out.append({"scope": scope, **fact.to_public()})
    return out


def reembed_memory(data: UserData, users: list[str]) -> dict[str, int]:
    """Embed the facts of these users again with the current model (after EMBEDDING_MODEL
    changed, or facts stored while the model was down); return users and facts done."""
    done = facts = 0
    for user in users:
        facts += data.facts.reembed(user)
        done += 1
    log.info("audit.memory_reembedded", users=done, facts=facts)
    return {"users": done, "facts": facts}


def memory_report(data: UserData, user: str) -> dict[str, Any]:
    """Return the user's facts, settings and counters."""
    meta = data.meta.meta(user)
    return {
        "user": [f.to_public() for f in data.facts.load(user, "user").values()],
        "session": [f.to_public() for f in data.facts.load(user, "session").values()],
        "opted_out": meta.get("opted_out") == "1",
        "extracted_seq": as_int(meta.get("extracted_seq"), "extracted_seq"),
        "stats": data.meta.stats(user),
    }


#: Provenance of org facts that came from ORG_FACTS_FILE ("org": written before it was told apart).
FROM_FILE = ("org_file", "org")


def parse_org_facts(data: Any, provenance: str = "admin_api") -> dict[str, Fact]:
    """Turn {"key": "value"} or {"key": {"value": …, "category": …}} into org facts."""
    if not isinstance(data, dict):
        raise OperationError("org facts must be a JSON object of key -> value")
    facts = {}
    now = time.time()
    for raw_key, item in data.items():
        entry = item if isinstance(item, dict) else {"value": item}
        value = str(entry.get("value", "")).strip()
        key = normalize_key(str(raw_key))
        category = str(entry.get("category") or category_for(key))
        importance = entry.get("importance", 0.6)
        if not value or category not in CATEGORIES:
            raise OperationError(f"org fact {raw_key!r}: needs a value and a known category")
        if not isinstance(importance, (int, float)) or isinstance(importance, bool) or not 0 <= importance <= 1:
            raise OperationError(f"org fact {raw_key!r}: importance must be a number between 0 and 1")
        facts[key] = Fact(
            key=key,
            value=value,
            category=category,
            confidence=1.0,
            importance=float(importance),
            source="operator",
            created_at=now,
            updated_at=now,
            provenance=provenance,
        )
    return facts


def load_org_file(facts: FactStore, path: Path) -> int:
    """Load org facts from a JSON file into Redis at startup; return how many it set.

    The file owns the keys it brought: they are updated, and removed when the file drops
    them. What operators set through the admin API is theirs and survives every restart,
    even for a key the file also names. Each process does the same at start: idempotent.
    """
    parsed = parse_org_facts(json.loads(path.read_text(encoding="utf-8")), provenance=FROM_FILE[0])
    current = facts.org_facts(fresh=True)
    operators = {key for key, fact in current.items() if fact.provenance not in FROM_FILE}
    gone = [key for key, fact in current.items() if fact.provenance in FROM_FILE and key not in parsed]
    wanted = {key: fact for key, fact in parsed.items() if key not in operators}
    facts.set_org_facts(wanted)
    for key in gone:
        facts.delete_org_fact(key)
    log.info("org_facts.loaded", count=len(wanted), removed=len(gone), kept_operator_set=len(operators), file=path.name)
    return len(wanted)
