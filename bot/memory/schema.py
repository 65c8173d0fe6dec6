"""What the extraction model returns: the Structured Outputs schema, and a lenient parser for
servers that answer something else anyway."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from bot.memory.rules import CATEGORIES, normalize_key
from bot.storage.records import Fact

Category = Literal[
    "identity", "location", "preference", "diet", "health", "work", "family", "contact", "schedule", "other"
]

#: A fact's temporal stability (docs/entities.md): static (a birthplace), dynamic (a city, a job: true
#: until it changes), ephemeral (today's plans), unknown.
Stability = Literal["static", "dynamic", "ephemeral", "unknown"]
STABILITY_SCOPES = {"static": "user", "dynamic": "user", "ephemeral": "session"}


class ExtractedFact(BaseModel):
    """One fact as the extraction model returns it."""

    key: str = Field(min_length=1, max_length=80)
    value: str = Field(min_length=1, max_length=300)
    category: Category = "other"
    confidence: float = Field(ge=0, le=1)
    importance: float = Field(ge=0, le=1)
    scope: Literal["user", "session"] = "user"
    explicit: bool = False
    temporal_stability: Stability = "unknown"

    @property
    def target_scope(self) -> str:
        """Return where the fact is stored: ephemeral facts in the session scope (they expire
        with SESSION_FACTS_TTL_HOURS), static and dynamic ones in the user scope; with the
        stability unknown, the scope the model chose."""
        return STABILITY_SCOPES.get(self.temporal_stability, self.scope)


class Extraction(BaseModel):
    """The extraction model's whole answer."""

    facts: list[ExtractedFact] = []


#: Structured Outputs schema (strict: every property required, nothing else allowed).
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "user_facts",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["facts"],
            "properties": {
                "facts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": [
                            "key", "value", "category", "confidence", "importance", "scope", "explicit",
                            "temporal_stability",
                        ],
                        "properties": {
                            "key": {"type": "string"},
                            "value": {"type": "string"},
                            "category": {"type": "string", "enum": list(CATEGORIES)},
                            "confidence": {"type": "number"},
                            "importance": {"type": "number"},
                            "scope": {"type": "string", "enum": ["user", "session"]},
                            "explicit": {"type": "boolean"},
                            "temporal_stability": {
                                "type": "string", "enum": ["static", "dynamic", "ephemeral", "unknown"]
                            },
                        },
                    },
                }
            },
        },
    },
}

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def json_candidates(text: str) -> Iterator[str]:
    """Yield the places a model answer may hold its JSON: the whole text (strict) first; then,
    as docs/memory.md describes, leniently: each code fence's body, the outermost {...} or [...]."""
    yield text
    yield from (m.group(1) for m in _FENCE.finditer(text))
    outermost = _outermost(text)
    if outermost:
        yield outermost


def json_items(text: str, field: str) -> list[Any]:
    """Return the list a model answer holds under `field` (or as a bare list), from the first
    readable candidate. Never raises; [] when nothing readable."""
    for attempt in json_candidates(text):
        try:
            data = json.loads(attempt)
        except ValueError:
            continue
        if isinstance(data, dict):
            items = data.get(field, [])
        elif isinstance(data, list):
            items = data
        else:
            continue
        return items if isinstance(items, list) else []
    return []


Item = TypeVar("Item", bound=BaseModel)


def valid_items(text: str, field: str, model: type[Item]) -> tuple[list[Item], int]:
    """Return the items under `field` that validate as `model`, and how many did not: each
    item is validated on its own, so one bad item costs only itself."""
    good: list[Item] = []
    bad = 0
    for item in json_items(text, field):
        try:
            good.append(model.model_validate(item))
        except ValidationError:
            bad += 1
    return good, bad


def parse_extraction(text: str) -> tuple[list[ExtractedFact], int]:
    """Parse the model's answer; return the valid facts and how many items were malformed."""
    return valid_items(text, "facts", ExtractedFact)


def _outermost(text: str) -> str | None:
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = max(text.rfind("}"), text.rfind("]"))
    return text[start : end + 1] if end > start else None


def fact_from_extracted(item: ExtractedFact, *, source: str, provenance: str) -> Fact:
    """Turn a model-extracted fact into a Fact with a normalized key."""
    return Fact(
        key=normalize_key(item.key),
        value=item.value.strip(),
        category=item.category,
        confidence=round(item.confidence, 3),
        importance=round(item.importance, 3),
        source=source,
        provenance=provenance,
    )
