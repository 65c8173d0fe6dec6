"""The records the bot stores, and their JSON: a conversation pair and a durable fact."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import structlog

log = structlog.get_logger(__name__)

#: Superseded values kept per fact, newest first.
HISTORY_KEEP = 3
#: Each side of a stored pair is cut to this many characters: the prompt budget could never
#: use more, and it keeps a user's Redis footprint bounded (a 5000-character message is 5 KB).
STORED_TEXT_CHARS = 1000


def clip(value: str, limit: int) -> str:
    """Cut text to at most limit characters, marking the cut."""
    return value if len(value) <= limit else value[: limit - 4].rstrip() + " […]"


def text(value: Any) -> Any:
    """Return bytes from a client that does not decode responses as str; anything else as is."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def as_float(value: Any, field: str = "") -> float | None:
    """Return a stored number as float, or None when absent or unreadable (logged by name:
    one corrupt field must not make every later message of the user fail)."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        log.warning("store.corrupt_value", field=field or "number")
        return None
    return number if math.isfinite(number) else None


def as_int(value: Any, field: str = "", default: int = 0) -> int:
    """Return a stored integer, or `default` when absent or unreadable (logged by name)."""
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            log.warning("store.corrupt_value", field=field or "integer")
            return default


def json_object(raw: Any) -> dict[str, Any] | None:
    """Return a stored JSON object, or None for anything else (absent, unreadable, not an object)."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def take_list(client: Any, key: str) -> list[Any]:
    """Return a whole list and delete it, atomically: a second caller gets nothing. Raise
    redis.RedisError as the client does."""
    with client.pipeline(transaction=True) as pipe:
        pipe.lrange(key, 0, -1)
        pipe.delete(key)
        raw, _ = pipe.execute()
    return list(raw)


def flat_to_dict(flat: list[Any]) -> dict[str, str]:
    """Turn a flat HGETALL reply from a script ([k1, v1, k2, v2…]) into a dict."""
    return {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat), 2)}


@dataclass(frozen=True)
class Pair:
    """One valid user/assistant exchange; n is its number among the user's pairs.

    Stored compactly as {"u": user, "a": assistant, "t": whole seconds, "n": number}: the
    MessageSid is not kept (`sid` is only set on a pair about to be stored, or read from
    data written before), since facts now name their pair by number. Older pairs, with
    "user", "assistant", "ts" and "sid", still read.
    """

    user: str
    assistant: str
    ts: float
    sid: str = ""
    n: int = 0

    def to_obj(self) -> dict[str, Any]:
        """Return the stored form (n is omitted until the commit script numbers the pair)."""
        obj: dict[str, Any] = {"u": self.user, "a": self.assistant, "t": int(self.ts)}
        if self.n:
            obj["n"] = self.n
        return obj

    def to_json(self) -> str:
        """Serialize for Redis."""
        return json.dumps(self.to_obj(), ensure_ascii=False, separators=(",", ":"))

    def to_public(self) -> dict[str, Any]:
        """Return the pair as inspect and export show it."""
        return {"user": self.user, "assistant": self.assistant, "ts": self.ts, "sid": self.sid, "n": self.n}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> "Pair":
        """Build from a decoded JSON object; unreadable numbers read as 0."""
        return cls(
            user=str(obj.get("u", obj.get("user", ""))),
            assistant=str(obj.get("a", obj.get("assistant", ""))),
            ts=as_float(obj.get("t", obj.get("ts")), "pair.ts") or 0.0,
            sid=str(obj.get("sid", "")),
            n=as_int(obj.get("n"), "pair.n"),
        )

    @classmethod
    def from_json(cls, raw: Any) -> "Pair | None":
        """Parse one stored pair; None (logged) for a corrupt one."""
        try:
            obj = json.loads(text(raw))
        except (TypeError, ValueError):
            obj = None
        if not isinstance(obj, dict):
            log.warning("store.corrupt_value", field="pair")
            return None
        return cls.from_obj(obj)


def decode_pairs(raw: str | bytes | None) -> list[Pair]:
    """Decode a stored JSON list of pairs; anything unreadable reads as no pairs."""
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        log.warning("store.corrupt_value", field="recent_messages")
        return []
    if not isinstance(items, list):  # cjson writes an empty list as {}
        return []
    return [Pair.from_obj(item) for item in items if isinstance(item, dict)]


@dataclass
class Fact:
    """One stored fact; the JSON of this object is the hash field's value."""

    key: str
    value: str
    category: str = "other"
    confidence: float = 0.0
    importance: float = 0.5
    source: str = "auto"
    created_at: float = 0.0
    updated_at: float = 0.0
    provenance: str = ""  # MessageSid of the turn it came from, or who set it
    previous: list[dict[str, Any]] = field(default_factory=list)
    conflict: dict[str, Any] | None = None

    def to_json(self) -> str:
        """Serialize for Redis (the key is the hash field, not repeated): packed when the fact
        has no history or conflict, so that most fit Redis's compact hash encoding (values of
        64 bytes at most), else JSON. Times are whole seconds."""
        if not self.previous and self.conflict is None:
            return pack_fact(self)
        data = asdict(self)
        data.pop("key")
        data["created_at"], data["updated_at"] = int(self.created_at), int(self.updated_at)
        if not data["previous"]:
            data.pop("previous")
        if data["conflict"] is None:
            data.pop("conflict")
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, key: str, raw: str) -> "Fact | None":
        """Parse a stored fact, packed or JSON; None for a corrupt entry (ignored, not fatal)."""
        if raw.startswith(PACKED_PREFIX):
            return unpack_fact(key, raw)
        try:
            data = json.loads(raw)
            return cls(
                key=key,
                value=str(data["value"]),
                category=str(data.get("category", "other")),
                confidence=float(data.get("confidence", 0)),
                importance=float(data.get("importance", 0.5)),
                source=str(data.get("source", "auto")),
                created_at=float(data.get("created_at", 0)),
                updated_at=float(data.get("updated_at", 0)),
                provenance=str(data.get("provenance", "")),
                previous=list(data.get("previous", []))[:HISTORY_KEEP],
                conflict=data.get("conflict"),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def to_public(self) -> dict[str, Any]:
        """Return the fact as the API and CLI show it."""
        return asdict(self)


#: Packed facts: "~1|category|confidence‰|importance‰|source|created|updated|provenance|value",
#: category and source as one-letter codes, times in whole seconds, created empty when it
#: equals updated; the value comes last and may hold "|".
PACKED_PREFIX = "~1|"
CATEGORY_CODES = {
    "identity": "i", "location": "l", "preference": "p", "diet": "d", "health": "h",
    "work": "w", "family": "f", "contact": "c", "schedule": "s", "other": "o",
}
SOURCE_CODES = {"auto": "a", "explicit": "e", "operator": "o"}
_CATEGORY_NAMES = {code: name for name, code in CATEGORY_CODES.items()}
_SOURCE_NAMES = {code: name for name, code in SOURCE_CODES.items()}


def pack_fact(fact: Fact) -> str:
    """Return the packed form of a fact without history or conflict."""
    updated = int(fact.updated_at)
    created = int(fact.created_at)
    return PACKED_PREFIX + "|".join(
        [
            CATEGORY_CODES.get(fact.category, fact.category.replace("|", "/")),
            str(round(fact.confidence * 1000)),
            str(round(fact.importance * 1000)),
            SOURCE_CODES.get(fact.source, fact.source.replace("|", "/")),
            "" if created == updated else str(created),
            str(updated),
            fact.provenance.replace("|", "/"),
            fact.value,
        ]
    )


def unpack_fact(key: str, raw: str) -> Fact | None:
    """Parse a packed fact; None when it is not one."""
    parts = raw[len(PACKED_PREFIX) :].split("|", 7)
    if len(parts) != 8:
        return None
    category, confidence, importance, source, created, updated, provenance, value = parts
    updated_at = as_float(updated, "fact.updated") or 0.0
    return Fact(
        key=key,
        value=value,
        category=_CATEGORY_NAMES.get(category, category),
        confidence=as_int(confidence, "fact.confidence") / 1000,
        importance=as_int(importance, "fact.importance", 500) / 1000,
        source=_SOURCE_NAMES.get(source, source),
        created_at=as_float(created, "fact.created") or updated_at,
        updated_at=updated_at,
        provenance=provenance,
    )


def decode_facts(raw: dict[Any, Any]) -> dict[str, Fact]:
    """Turn a facts hash into Fact objects, skipping corrupt entries."""
    out = {}
    for key, value in raw.items():
        fact = Fact.from_json(text(key), text(value))
        if fact is not None:
            out[fact.key] = fact
    return out
