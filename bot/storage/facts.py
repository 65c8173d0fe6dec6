"""Durable facts per user (and the org's), merged with optimistic transactions.

Keys: ``user_facts:{+E164}`` and ``session_facts:{+E164}`` hashes, normalized fact key ->
fact JSON (bot/storage/records.py); ``org_facts`` hash, the same for the org scope;
``user_vectors:{+E164}`` hash, fact key -> its 1-bit vector (bot/memory/vectors.py) and
``~m`` -> the model, written in the same transaction as the facts it describes: a vector
never outlives its value, and vectors of two models never share the hash.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

import redis
import structlog

from bot.exceptions import LLMUnavailable, StoreUnavailable
from bot.storage.keys import FACTS_PREFIX, MEMORY_PREFIX, ORG_FACTS_KEY, SESSION_FACTS_PREFIX, VECTORS_PREFIX, user_key
from bot.storage.optimistic import holds_write, watched
from bot.storage.records import Fact, as_int, decode_facts, text
from bot.storage.triggers import EXTRACTION_JOB

log = structlog.get_logger(__name__)

#: How long a process trusts its copy of the org facts before reading them again.
ORG_CACHE_S = 30.0
#: The vectors hash's field naming the model its vectors came from.
MODEL_FIELD = "~m"


class Encoder(Protocol):
    """Turns facts into stored vectors (bot/memory/vectors.py FactVectors)."""

    model: str

    def encode(self, facts: Any) -> dict[str, str]:
        """Return each fact's stored vector by key; raise LLMUnavailable."""


class FactStore:
    """Durable facts per user (and the org's), with optimistic transactions for merges."""

    def __init__(
        self, client: redis.Redis, *, facts_ttl_seconds: int = 0, session_ttl_seconds: int = 86400,
        vectors: Encoder | None = None,
    ) -> None:
        self.redis = client
        self.facts_ttl_seconds = facts_ttl_seconds
        self.session_ttl_seconds = session_ttl_seconds
        self.vectors = vectors  # None: EMBEDDING_MODEL=off, facts carry no vector
        self._org: tuple[float, dict[str, Fact]] | None = None

    def _scope_key(self, user: str, scope: str) -> str:
        return user_key(SESSION_FACTS_PREFIX if scope == "session" else FACTS_PREFIX, user)

    def _ttl(self, scope: str) -> int:
        return self.session_ttl_seconds if scope == "session" else self.facts_ttl_seconds

    def load(self, user: str, scope: str = "user") -> dict[str, Fact]:
        """Return the user's facts of one scope (user or session)."""
        try:
            return decode_facts(self.redis.hgetall(self._scope_key(user, scope)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def merge(
        self,
        user: str,
        scope: str,
        merge: Callable[[dict[str, Fact]], Any],
        *,
        extracted_seq: int | None = None,
        token: str | None = None,
        count_stats: bool = True,
    ) -> Any:
        """Apply merge(existing facts) -> MergeResult (bot/memory/rules.py) atomically; retry
        if a write raced us.

        With `token` (an extraction job's), nothing is written unless that job still holds
        the extraction trigger and the user has not opted out: an erase or an opt-out while
        the model was thinking wins. Returns None when so refused. With extracted_seq, also
        records extraction progress (never backwards) and frees the trigger.
        """
        facts_key = self._scope_key(user, scope)
        memory_key = user_key(MEMORY_PREFIX, user)
        vectors_key = user_key(VECTORS_PREFIX, user)

        def attempt(pipe: Any) -> Any:
            if token is not None and not holds_write(pipe, memory_key, EXTRACTION_JOB, token):
                pipe.unwatch()
                return None
            existing = decode_facts(pipe.hgetall(facts_key))
            progress = as_int(text(pipe.hget(memory_key, "extracted_seq")), "extracted_seq")
            # the model the stored vectors came from: only a writer with a model needs it
            stored_model = text(pipe.hget(vectors_key, MODEL_FIELD)) if scope == "user" and self.vectors else None
            result = merge(existing)
            encoded = self._encode(result.upserts) if scope == "user" else {}
            pipe.multi()
            if result.upserts:
                pipe.hset(facts_key, mapping={k: f.to_json() for k, f in result.upserts.items()})
            if result.deletes:
                pipe.hdel(facts_key, *result.deletes)
            if scope == "user":
                self._write_vectors(pipe, vectors_key, stored_model, encoded,
                                    stale=[k for k in [*result.upserts, *result.deletes] if k not in encoded])
            for name, value in result.stats.as_dict().items():
                if value and count_stats:
                    pipe.hincrby(memory_key, f"stat_{name}", value)
            if extracted_seq is not None and extracted_seq > progress:
                pipe.hset(memory_key, "extracted_seq", extracted_seq)
            if token is not None and extracted_seq is not None:  # the job's last write
                pipe.hdel(memory_key, f"{EXTRACTION_JOB}_at", f"{EXTRACTION_JOB}_token")
            if self._ttl(scope):
                pipe.expire(facts_key, self._ttl(scope))
            if self.facts_ttl_seconds:
                pipe.expire(memory_key, self.facts_ttl_seconds)
                if scope == "user":
                    pipe.expire(vectors_key, self.facts_ttl_seconds)
            pipe.execute()
            return result

        return watched(self.redis, (facts_key, memory_key, vectors_key), attempt, f"facts of {user[:4]}…")

    def _encode(self, facts: dict[str, Fact]) -> dict[str, str]:
        """Return the new facts' vectors; {} when there is no model or it failed (the facts
        are then picked by category until `memory reembed`)."""
        if self.vectors is None or not facts:
            return {}
        try:
            return self.vectors.encode(facts.values())
        except LLMUnavailable as err:
            log.warning("memory.stored_without_vectors", facts=len(facts), error=str(err)[:200],
                        detail="picked by category until `memory reembed`")
            return {}

    def _write_vectors(self, pipe: Any, key: str, stored_model: str | None, encoded: dict[str, str],
                       stale: list[str]) -> None:
        """Queue the vectors' changes: the new ones in, the stale ones out; all of another
        model's out first (two models' vectors are never compared)."""
        if encoded and self.vectors is not None and stored_model not in (None, self.vectors.model):
            pipe.delete(key)
        elif stale:
            pipe.hdel(key, *stale)
        if encoded and self.vectors is not None:
            pipe.hset(key, mapping={MODEL_FIELD: self.vectors.model, **encoded})

    def reembed(self, user: str) -> int:
        """Embed every fact of the user again with the current model, replacing all their
        vectors; return how many. Raise LLMUnavailable when the model fails (nothing changes)."""
        if self.vectors is None:
            return 0
        facts_key, vectors_key = user_key(FACTS_PREFIX, user), user_key(VECTORS_PREFIX, user)
        vectors = self.vectors

        def attempt(pipe: Any) -> int:
            existing = decode_facts(pipe.hgetall(facts_key))
            encoded = vectors.encode(existing.values())
            pipe.multi()
            pipe.delete(vectors_key)
            if encoded:
                pipe.hset(vectors_key, mapping={MODEL_FIELD: vectors.model, **encoded})
                if self.facts_ttl_seconds:
                    pipe.expire(vectors_key, self.facts_ttl_seconds)
            pipe.execute()
            return len(encoded)

        return watched(self.redis, (facts_key, vectors_key), attempt, f"facts of {user[:4]}…")

    def load_vectors(self, user: str) -> dict[str, str]:
        """Return the user's fact vectors as stored (with MODEL_FIELD)."""
        try:
            return {text(k): text(v) for k, v in self.redis.hgetall(user_key(VECTORS_PREFIX, user)).items()}
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def delete(self, user: str, key: str, scope: str = "user") -> bool:
        """Delete one fact (and its vector); return whether it existed."""
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.hdel(self._scope_key(user, scope), key)
                if scope == "user":
                    pipe.hdel(user_key(VECTORS_PREFIX, user), key)
                return bool(pipe.execute()[0])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    # -- org scope ---------------------------------------------------------------------
    def org_facts(self, fresh: bool = False) -> dict[str, Fact]:
        """Return the org's facts, re-read at most every ORG_CACHE_S seconds unless fresh."""
        now = time.monotonic()
        if not fresh and self._org is not None and now - self._org[0] < ORG_CACHE_S:
            return self._org[1]
        try:
            facts = decode_facts(self.redis.hgetall(ORG_FACTS_KEY))
        except redis.RedisError as err:
            if self._org is not None:  # serve the stale copy rather than nothing
                return self._org[1]
            raise StoreUnavailable(str(err)) from err
        self._org = (now, facts)
        return facts

    def set_org_facts(self, facts: dict[str, Fact], replace_all: bool = False) -> None:
        """Store org facts (key -> Fact); replace_all drops the keys not given (a file reload)."""
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                if replace_all:
                    pipe.delete(ORG_FACTS_KEY)
                if facts:
                    pipe.hset(ORG_FACTS_KEY, mapping={k: f.to_json() for k, f in facts.items()})
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        self._org = None

    def delete_org_fact(self, key: str) -> bool:
        """Delete one org fact; return whether it existed."""
        try:
            existed = bool(self.redis.hdel(ORG_FACTS_KEY, key))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        self._org = None
        return existed
