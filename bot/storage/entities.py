"""A user's entities (bot/memory/entities.py), and which facts pass 2 has read.

Key ``user_entities:{+E164}`` hash: ``e:<TYPE:normalized name>`` -> entity JSON
(``n`` name, ``t`` type, ``a`` aliases, ``c`` confidence, ``f`` fact keys that mention it,
``r`` related entity key -> weight); ``s:<fact key>`` -> ``<content hash>@<prompt version>``
of the fact as pass 2 last read it (the cache: an unchanged fact is never sent twice).
In ``user_memory:{+E164}``: ``entities_version`` (moves on at every write, so a process's
cached match index knows it is stale) and the ``entity_job_at`` / ``entity_job_token``
trigger (bot/storage/triggers.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import ENTITIES_PREFIX, MEMORY_PREFIX, user_key
from bot.storage.records import Fact, text
from bot.storage.triggers import ENTITY_JOB

ENTITY_FIELD = "e:"
STAMP_FIELD = "s:"
VERSION_FIELD = "entities_version"
#: Optimistic transactions retry this often when a concurrent write touched the same keys.
WATCH_RETRIES = 8


@dataclass
class Entity:
    """One named thing in a user's facts."""

    key: str  # `TYPE:normalized name` (bot/memory/names.py), the hash field after "e:"
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    confidence: float = 0.0
    facts: list[str] = field(default_factory=list)  # MENTIONS: keys of the facts naming it
    related: dict[str, float] = field(default_factory=dict)  # RELATED: entity key -> weight

    def names(self) -> list[str]:
        """Return the canonical name, then the aliases."""
        return [self.name, *self.aliases]

    def to_json(self) -> str:
        """Serialize compactly for the user's entity hash."""
        data: dict[str, Any] = {"n": self.name, "t": self.type, "c": round(self.confidence, 2), "f": self.facts}
        if self.aliases:
            data["a"] = self.aliases
        if self.related:
            data["r"] = {k: round(w, 3) for k, w in self.related.items()}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, key: str, raw: str) -> "Entity | None":
        """Parse a stored entity; None for a corrupt entry (ignored, not fatal)."""
        try:
            data = json.loads(raw)
            return cls(
                key=key,
                name=str(data["n"]),
                type=str(data["t"]),
                aliases=[str(a) for a in data.get("a", [])],
                confidence=float(data.get("c", 0)),
                facts=[str(f) for f in data.get("f", [])],
                related={str(k): float(w) for k, w in dict(data.get("r", {})).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def to_public(self) -> dict[str, Any]:
        """Return the entity as the CLI, the admin API and export show it."""
        return {
            "key": self.key, "name": self.name, "type": self.type, "aliases": self.aliases,
            "confidence": self.confidence, "facts": self.facts, "related": self.related,
        }


def fact_stamp(fact: Fact, prompt_version: str) -> str:
    """Return what pass 2 records of a fact it read: its content's hash and the prompt's version."""
    digest = hashlib.sha1(f"{fact.key}\n{fact.value}".encode()).hexdigest()[:10]
    return f"{digest}@{prompt_version}"


@dataclass
class EntityState:
    """A user's entities and the stamps of the facts they were read from."""

    entities: dict[str, Entity] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)  # fact key -> fact_stamp

    def unread(self, facts: dict[str, Fact], prompt_version: str) -> tuple[list[str], list[str]]:
        """Return (facts to read: new or changed since, facts gone since read)."""
        changed = [k for k, f in facts.items() if self.stamps.get(k) != fact_stamp(f, prompt_version)]
        gone = [k for k in self.stamps if k not in facts]
        return changed, gone


def decode_state(raw: dict) -> EntityState:
    """Build the state from the hash (bytes or str); corrupt entries are skipped."""
    state = EntityState()
    for name, value in raw.items():
        name, value = text(name), text(value)
        if name.startswith(ENTITY_FIELD):
            entity = Entity.from_json(name[len(ENTITY_FIELD) :], value)
            if entity is not None:
                state.entities[entity.key] = entity
        elif name.startswith(STAMP_FIELD):
            state.stamps[name[len(STAMP_FIELD) :]] = value
    return state


def encode_state(state: EntityState) -> dict[str, str]:
    """Return the hash fields of a state."""
    fields = {f"{ENTITY_FIELD}{key}": e.to_json() for key, e in state.entities.items()}
    fields.update({f"{STAMP_FIELD}{k}": v for k, v in state.stamps.items()})
    return fields


class EntityStore:
    """Read and write a user's entities, with the job's trigger as a guard."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = 0) -> None:
        self.redis = client
        self.ttl_seconds = ttl_seconds

    def load(self, user: str) -> EntityState:
        """Return the user's entities and stamps."""
        try:
            return decode_state(self.redis.hgetall(user_key(ENTITIES_PREFIX, user)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def version(self, user: str) -> str:
        """Return the user's entities version ('' before the first write)."""
        try:
            return text(self.redis.hget(user_key(MEMORY_PREFIX, user), VERSION_FIELD)) or ""
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def update(self, user: str, token: str, change: Callable[[EntityState], EntityState]) -> EntityState | None:
        """Apply change(current state) -> new state atomically, if the job with `token` still
        holds the entity trigger and the user has not opted out; free the trigger with the
        write. Return the new state, or None when refused (erased, opted out, taken over)."""
        key = user_key(ENTITIES_PREFIX, user)
        memory_key = user_key(MEMORY_PREFIX, user)
        for _ in range(WATCH_RETRIES):
            try:
                with self.redis.pipeline(transaction=True) as pipe:
                    pipe.watch(key, memory_key)
                    if text(pipe.hget(memory_key, f"{ENTITY_JOB}_token")) != token or text(
                        pipe.hget(memory_key, "opted_out")
                    ) == "1":
                        pipe.unwatch()
                        return None
                    old = encode_state(decode_state(pipe.hgetall(key)))
                    state = change(decode_state(pipe.hgetall(key)))
                    new = encode_state(state)
                    pipe.multi()
                    stale = [f for f in old if f not in new]
                    if stale:
                        pipe.hdel(key, *stale)
                    fresh = {f: v for f, v in new.items() if old.get(f) != v}
                    if fresh:
                        pipe.hset(key, mapping=fresh)
                    pipe.hincrby(memory_key, VERSION_FIELD, 1)
                    pipe.hdel(memory_key, f"{ENTITY_JOB}_at", f"{ENTITY_JOB}_token")
                    if self.ttl_seconds:
                        pipe.expire(key, self.ttl_seconds)
                        pipe.expire(memory_key, self.ttl_seconds)
                    pipe.execute()
                    return state
            except redis.WatchError:
                continue
            except redis.RedisError as err:
                raise StoreUnavailable(str(err)) from err
        raise StoreUnavailable(f"entities of {user[:4]}… kept changing; gave up after {WATCH_RETRIES} tries")

    def raw_bytes(self, user: str) -> int:
        """Return the bytes Redis uses for the user's entity key (MEMORY USAGE)."""
        try:
            return int(self.redis.memory_usage(user_key(ENTITIES_PREFIX, user), samples=0) or 0)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
