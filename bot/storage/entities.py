"""A user's entities (bot/memory/entities.py), and which facts pass 2 has read.

Key ``user_entities:{+E164}``: one string, written whole, as compact as a cache can be
(entities add at most ~40 % to the bytes of the facts they come from). Lines:

    1|<pass-2 prompt version>
    <type code>|<name>|<confidence, tenths>|<fact key>,<fact key>…|<alias>;<alias>…   one per entity
    #<base64 of 3-byte hashes of (fact key, value), one per fact read>

Type codes (TYPE_CODES): pe PERSON, pt PET, pl PLACE, or ORG, pr PRODUCT, pj PROJECT, ev EVENT,
sy SYSTEM, to TOOL, sk SKILL, fi FILE, co CONCEPT. E.g. `pt|Rex|9|dog_name,dog_vet|Rexy`.

MENTIONS are the fact keys of each entity; RELATED edges are derived from them when read
(entities named in one fact, `relate`), so they can never disagree. The hashes are the
cache: an unchanged fact is never sent to pass 2 twice; another prompt version reads all
again. In ``user_memory:{+E164}``: ``entities_version`` (a new random value at every change, so a
process's cached match index knows it is stale) and the ``entity_job_at`` /
``entity_job_token`` trigger (bot/storage/triggers.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import ENTITIES_PREFIX, MEMORY_PREFIX, user_key
from bot.storage.optimistic import holds_write, watched
from bot.storage.records import Fact, as_float, text
from bot.storage.triggers import ENTITY_JOB

FORMAT = "1"
TYPE_CODES = {"PERSON": "pe", "PET": "pt", "PLACE": "pl", "ORG": "or", "PRODUCT": "pr", "PROJECT": "pj",
              "EVENT": "ev", "SYSTEM": "sy", "TOOL": "to", "SKILL": "sk", "FILE": "fi", "CONCEPT": "co"}
_TYPES = {code: name for name, code in TYPE_CODES.items()}
#: Bytes kept of each fact read: a fact changed to a value whose hash another fact of the
#: user already has is missed with odds of about facts / 2**24 (50 facts: 3 in a million).
HASH_BYTES = 3
VERSION_FIELD = "entities_version"
#: RELATED edges kept per entity, the heaviest.
MAX_RELATED = 8
_UNSAFE = str.maketrans({"|": "/", ";": ",", ",": " ", "\n": " ", "\r": " ", "#": " "})


@dataclass
class Entity:
    """One named thing in a user's facts."""

    key: str  # `TYPE:normalized name` (bot/memory/names.py)
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    confidence: float = 0.0
    facts: list[str] = field(default_factory=list)  # MENTIONS: keys of the facts naming it
    related: dict[str, float] = field(default_factory=dict)  # RELATED: entity key -> weight (derived)

    def names(self) -> list[str]:
        """Return the canonical name, then the aliases."""
        return [self.name, *self.aliases]

    def to_line(self) -> str:
        """Return the entity's line in the stored string."""
        name = self.name.translate(_UNSAFE)
        aliases = ";".join(a.translate(_UNSAFE) for a in self.aliases)
        tenths = min(9, max(0, round(self.confidence * 10)))
        return f"{TYPE_CODES.get(self.type, self.type)}|{name}|{tenths}|{','.join(self.facts)}|{aliases}"

    @classmethod
    def from_line(cls, key_of: Callable[[str, str], str], line: str) -> "Entity | None":
        """Parse one stored line; None for a corrupt one (ignored, not fatal)."""
        parts = line.split("|")
        if len(parts) != 5 or not parts[0] or not parts[1]:
            return None
        code, name, tenths, facts, aliases = parts
        kind = _TYPES.get(code, code)
        return cls(key_of(kind, name), name, kind, [a for a in aliases.split(";") if a],
                   (as_float(tenths, "entity confidence") or 0.0) / 10, [f for f in facts.split(",") if f])

    def to_public(self) -> dict[str, Any]:
        """Return the entity as the CLI, the admin API and export show it."""
        return {
            "key": self.key, "name": self.name, "type": self.type, "aliases": self.aliases,
            "confidence": self.confidence, "facts": self.facts, "related": self.related,
        }


def fact_hash(fact: Fact) -> bytes:
    """Return the bytes pass 2 keeps of a fact it read: a hash of its key and value."""
    return hashlib.blake2b(f"{fact.key}\n{fact.value}".encode(), digest_size=HASH_BYTES).digest()


def relate(entities: dict[str, Entity]) -> None:
    """Set RELATED edges: entities named in the same fact, weighted by how many facts they
    share (one: 0.75, two: 0.875, ...), the MAX_RELATED heaviest kept per entity."""
    shared: dict[tuple[str, str], int] = {}
    by_fact: dict[str, list[str]] = {}
    for key, entity in entities.items():
        for fact in entity.facts:
            by_fact.setdefault(fact, []).append(key)
    for keys in by_fact.values():
        for a, b in combinations(sorted(set(keys)), 2):
            shared[(a, b)] = shared.get((a, b), 0) + 1
    edges: dict[str, dict[str, float]] = {key: {} for key in entities}
    for (a, b), count in shared.items():
        edges[a][b] = edges[b][a] = 1 - 0.5 ** (count + 1)
    for key, entity in entities.items():
        entity.related = dict(sorted(edges[key].items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_RELATED])


@dataclass
class EntityState:
    """A user's entities, and the facts pass 2 read them from (by hash, with its prompt version)."""

    entities: dict[str, Entity] = field(default_factory=dict)
    read: set[bytes] = field(default_factory=set)  # fact_hash of every fact read
    prompt_version: str = ""

    def unread(self, facts: dict[str, Fact], prompt_version: str) -> tuple[list[str], list[str]]:
        """Return (facts to read: new or changed since, or all under another prompt version;
        facts an entity names that are gone)."""
        same = prompt_version == self.prompt_version
        changed = [k for k, f in facts.items() if not same or fact_hash(f) not in self.read]
        named = dict.fromkeys(k for e in self.entities.values() for k in e.facts)
        return changed, [k for k in named if k not in facts]


def decode_state(raw: str | bytes | None, key_of: Callable[[str, str], str]) -> EntityState:
    """Build the state from the stored string; corrupt lines are skipped."""
    state = EntityState()
    lines = text(raw).splitlines() if raw else []
    if not lines or not lines[0].startswith(FORMAT + "|"):
        return state  # absent, or another format: everything is read again
    state.prompt_version = lines[0].split("|", 1)[1]
    for line in lines[1:]:
        if line.startswith("#"):
            try:
                blob = base64.b64decode(line[1:], validate=True)
            except (binascii.Error, ValueError):
                continue
            state.read = {blob[i : i + HASH_BYTES] for i in range(0, len(blob) - HASH_BYTES + 1, HASH_BYTES)}
            continue
        entity = Entity.from_line(key_of, line)
        if entity is not None:
            state.entities[entity.key] = entity
    relate(state.entities)
    return state


def encode_state(state: EntityState) -> str:
    """Return the stored string of a state."""
    lines = [f"{FORMAT}|{state.prompt_version}", *(e.to_line() for e in state.entities.values())]
    lines.append("#" + base64.b64encode(b"".join(sorted(state.read))).decode())
    return "\n".join(lines)


class EntityStore:
    """Read and write a user's entities, with the job's trigger as a guard."""

    def __init__(self, client: redis.Redis, key_of: Callable[[str, str], str], *, ttl_seconds: int = 0) -> None:
        self.redis = client
        self.key_of = key_of  # (type, name) -> the entity's normalized key
        self.ttl_seconds = ttl_seconds

    def load(self, user: str) -> EntityState:
        """Return the user's entities and the facts they were read from."""
        try:
            return decode_state(self.redis.get(user_key(ENTITIES_PREFIX, user)), self.key_of)
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

        def attempt(pipe: Any) -> EntityState | None:
            if not holds_write(pipe, memory_key, ENTITY_JOB, token):
                pipe.unwatch()
                return None
            old = text(pipe.get(key))
            state = change(decode_state(old, self.key_of))
            new = encode_state(state)
            pipe.multi()
            if new != old:
                pipe.set(key, new)
                # a new random version (not a counter: an erased user's would restart and
                # match an index a process still holds); only a change makes indexes stale
                pipe.hset(memory_key, VERSION_FIELD, uuid.uuid4().hex[:12])
            pipe.hdel(memory_key, f"{ENTITY_JOB}_at", f"{ENTITY_JOB}_token")
            if self.ttl_seconds:
                pipe.expire(key, self.ttl_seconds)
                pipe.expire(memory_key, self.ttl_seconds)
            pipe.execute()
            return state

        return watched(self.redis, (key, memory_key), attempt, f"entities of {user[:4]}…")
