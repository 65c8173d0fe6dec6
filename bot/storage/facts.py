"""Durable facts per user (and the org's), merged with optimistic transactions.

Keys: ``user_facts:{+E164}``, one string holding the user's facts and their 1-bit vectors
(bot/memory/vectors.py) with the model's name, packed (bot/storage/packed_facts.py): a
vector is written in the same transaction as the fact it describes, never outlives its
value, and vectors of two models never share the string. ``session_facts:{+E164}`` hash,
normalized fact key -> fact JSON (bot/storage/records.py); ``org_facts`` hash, the same for
the org scope. ``user_vectors:{+E164}``: the vectors of a user stored before the packed
string, deleted by their next write.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

import redis
import structlog

from bot.exceptions import LLMUnavailable, StoreUnavailable
from bot.storage import packed_facts
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
            if scope == "user":
                return decode_facts(packed_facts.read(self.redis, *self._user_keys(user))[0])
            return decode_facts(self.redis.hgetall(self._scope_key(user, scope)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    @staticmethod
    def _user_keys(user: str) -> tuple[str, str]:
        """Return the user's facts key and the vectors key of the encoding before it."""
        return user_key(FACTS_PREFIX, user), user_key(VECTORS_PREFIX, user)

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
            if scope == "user":
                stored, vectors = packed_facts.read(pipe, facts_key, vectors_key)
            else:
                stored, vectors = pipe.hgetall(facts_key), {}
            existing = decode_facts(stored)
            progress = as_int(text(pipe.hget(memory_key, "extracted_seq")), "extracted_seq")
            result = merge(existing)
            encoded = self._encode(result.upserts) if scope == "user" else {}
            pipe.multi()
            packed = scope == "user" and bool(result.upserts or result.deletes)  # written whole, with its TTL
            if packed:
                stored = {k: v for k, v in stored.items() if k not in result.deletes}
                stored.update({k: f.to_json() for k, f in result.upserts.items()})
                vectors = self._vectors_after(vectors, encoded, stale=[*result.upserts, *result.deletes])
                self._write_user(pipe, facts_key, vectors_key, stored, vectors)
            elif scope != "user":
                if result.upserts:
                    pipe.hset(facts_key, mapping={k: f.to_json() for k, f in result.upserts.items()})
                if result.deletes:
                    pipe.hdel(facts_key, *result.deletes)
            for name, value in result.stats.as_dict().items():
                if value and count_stats:
                    pipe.hincrby(memory_key, f"stat_{name}", value)
            if extracted_seq is not None and extracted_seq > progress:
                pipe.hset(memory_key, "extracted_seq", extracted_seq)
            if token is not None and extracted_seq is not None:  # the job's last write
                pipe.hdel(memory_key, f"{EXTRACTION_JOB}_at", f"{EXTRACTION_JOB}_token")
            if self._ttl(scope) and not packed:
                pipe.expire(facts_key, self._ttl(scope))
            if self.facts_ttl_seconds:
                pipe.expire(memory_key, self.facts_ttl_seconds)
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

    def _vectors_after(self, vectors: dict[str, str], encoded: dict[str, str], stale: list[str]) -> dict[str, str]:
        """Return the vectors after a write: the new ones in, the stale ones out; all of
        another model's out first (two models' vectors are never compared)."""
        if encoded and self.vectors is not None and vectors.get(MODEL_FIELD) not in (None, self.vectors.model):
            vectors = {}
        vectors = {k: v for k, v in vectors.items() if k not in stale or k in encoded}
        if encoded and self.vectors is not None:
            vectors.update({MODEL_FIELD: self.vectors.model, **encoded})
        return vectors

    def _write_user(self, pipe: Any, facts_key: str, vectors_key: str, stored: dict[str, str],
                    vectors: dict[str, str]) -> None:
        """Queue the user's facts and vectors as one packed string (or none when no fact is
        left); the vectors hash of the encoding before it goes."""
        if stored:
            pipe.set(facts_key, packed_facts.pack(stored, vectors), ex=self.facts_ttl_seconds or None)
        else:
            pipe.delete(facts_key)
        pipe.delete(vectors_key)

    def reembed(self, user: str) -> int:
        """Embed every fact of the user again with the current model, replacing all their
        vectors; return how many. Raise LLMUnavailable when the model fails (nothing changes)."""
        if self.vectors is None:
            return 0
        facts_key, vectors_key = self._user_keys(user)
        vectors = self.vectors

        def attempt(pipe: Any) -> int:
            stored, _ = packed_facts.read(pipe, facts_key, vectors_key)
            encoded = vectors.encode(decode_facts(stored).values())
            pipe.multi()
            if stored:
                self._write_user(pipe, facts_key, vectors_key, stored,
                                 {MODEL_FIELD: vectors.model, **encoded} if encoded else {})
            pipe.execute()
            return len(encoded)

        return watched(self.redis, (facts_key, vectors_key), attempt, f"facts of {user[:4]}…")

    def load_vectors(self, user: str) -> dict[str, str]:
        """Return the user's fact vectors as stored (with MODEL_FIELD)."""
        try:
            return packed_facts.read(self.redis, *self._user_keys(user))[1]
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def delete(self, user: str, key: str, scope: str = "user") -> bool:
        """Delete one fact (and its vector); return whether it existed."""
        if scope != "user":
            try:
                return bool(self.redis.hdel(self._scope_key(user, scope), key))
            except redis.RedisError as err:
                raise StoreUnavailable(str(err)) from err
        facts_key, vectors_key = self._user_keys(user)

        def attempt(pipe: Any) -> bool:
            stored, vectors = packed_facts.read(pipe, facts_key, vectors_key)
            if key not in stored:
                pipe.unwatch()
                return False
            pipe.multi()
            self._write_user(pipe, facts_key, vectors_key, {k: v for k, v in stored.items() if k != key},
                             {k: v for k, v in vectors.items() if k != key})
            pipe.execute()
            return True

        return watched(self.redis, (facts_key, vectors_key), attempt, f"facts of {user[:4]}…")

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
