"""A user's durable facts and their vectors, packed into one compact string.

`user_facts:{+E164}` holds ``F1:`` + base64(zlib(JSON ``{"f": {key: stored fact}, "v":
{key: vector, "~m": model}}``)), where a stored fact is what records.Fact.to_json writes and
a vector is what bot/memory/vectors.py FactVectors writes. Why one string and not a hash:
a hash leaves Redis's compact encoding as soon as one value passes 64 bytes, as most real
facts do, and then 50 facts and their vectors took 10.6 to 11.2 KB; packed they take under
6 KB (docs/semantic.md, Redis). Every write replaces the whole string inside the same
optimistic transaction that read it (bot/storage/facts.py), so nothing is lost to a race.

Users stored before this encoding still have a `user_facts` hash and a `user_vectors` hash:
both are read as they are, and the user's next write turns them into the string.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, Mapping

import redis
import structlog

from bot.storage.records import flat_to_dict, text

log = structlog.get_logger(__name__)

#: The encoding's tag and version, first in the string.
TAG = "F1:"


def pack(facts: Mapping[str, str], vectors: Mapping[str, str]) -> str:
    """Return the stored string of these facts (key -> stored fact) and vectors (key ->
    vector, with the model's field); vectors of facts not given are left out."""
    kept = {k: v for k, v in vectors.items() if k in facts or k.startswith("~")}
    if not any(k in facts for k in kept):
        kept = {}
    payload = json.dumps({"f": dict(facts), "v": kept}, ensure_ascii=False, separators=(",", ":"))
    return TAG + base64.b64encode(zlib.compress(payload.encode("utf-8"), 9)).decode("ascii")


def unpack(raw: str | bytes | None) -> tuple[dict[str, str], dict[str, str]]:
    """Return (facts, vectors) from a stored string; ({}, {}) when there is none. A string
    that cannot be read is logged and read as empty."""
    if raw is None:
        return {}, {}
    raw = text(raw)
    try:
        if not raw.startswith(TAG):
            raise ValueError("unknown encoding")
        data: Any = json.loads(zlib.decompress(base64.b64decode(raw[len(TAG):], validate=True)).decode("utf-8"))
        facts, vectors = data["f"], data.get("v", {})
        if not isinstance(facts, dict) or not isinstance(vectors, dict):
            raise ValueError("not a facts record")
        return {str(k): str(v) for k, v in facts.items()}, {str(k): str(v) for k, v in vectors.items()}
    except (ValueError, KeyError, TypeError, zlib.error) as err:
        log.error("memory.facts_unreadable", error=f"{type(err).__name__}: {str(err)[:120]}", length=len(raw))
        return {}, {}


def read_stored(facts: Any, vectors: Any = None) -> tuple[dict[str, str], dict[str, str]]:
    """Return (facts, vectors) from what the claim script gave for the facts key: the packed
    string, or (stored before it) the flat facts hash beside the flat vectors hash."""
    if facts is None or isinstance(facts, (str, bytes)):
        return unpack(facts)
    return flat_to_dict(facts), flat_to_dict(vectors or [])


def read(client: Any, facts_key: str, vectors_key: str) -> tuple[dict[str, str], dict[str, str]]:
    """Read a user's facts and vectors (a pipeline in WATCH mode reads at once): the
    packed string, or the two hashes stored before it."""
    kind = text(client.type(facts_key))
    if kind == "string":
        return unpack(client.get(facts_key))
    if kind == "hash":
        return _texts(client.hgetall(facts_key)), _texts(client.hgetall(vectors_key))
    return {}, {}


def _texts(raw: dict[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}


def count(raw_string: Any, raw_hlen: Any) -> int:
    """Return how many facts a user has from a pipeline's GET and HLEN of the facts key
    (one of the two fails with WRONGTYPE, whichever encoding the user is stored in)."""
    if isinstance(raw_string, (str, bytes)):
        return len(unpack(raw_string)[0])
    return int(raw_hlen) if isinstance(raw_hlen, int) else 0


def is_wrong_type(err: Exception) -> bool:
    """Return whether a pipeline's error is the WRONGTYPE that count() expects."""
    return isinstance(err, redis.ResponseError) and str(err).startswith("WRONGTYPE")
