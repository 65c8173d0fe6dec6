"""Pass 2 of extraction (docs/entities.md): the named entities inside the user's facts.

`extract_entities(text)` is the one reusable call (the prompt prompts/extract_entities.md,
Structured Outputs, the same lenient parser as facts). `read_entities` runs it in the
background on the facts pass 1 added or changed since they were last read, all of them in
one call, and folds the answer into the user's entities (bot/memory/entities.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field

from bot.llm.client import Completion, LLMClient
from bot.llm.prompts import Prompt
from bot.memory.entities import ENTITY_TYPES, AbsorbStats, Mention, absorb
from bot.llm.fence import inert
from bot.memory.names import comparable
from bot.memory.schema import valid_items
from bot.storage.entities import Entity, EntityState, EntityStore, fact_hash
from bot.storage.facts import FactStore
from bot.storage.records import Fact

log = structlog.get_logger(__name__)

#: Facts one call reads at most; the job's follow-up reads the rest.
MAX_FACTS_PER_CALL = 30
#: Known entities listed to the model, so it reuses their canonical names.
MAX_KNOWN_LISTED = 60

EntityType = Literal[
    "PERSON", "PET", "PLACE", "ORG", "PRODUCT", "PROJECT", "EVENT", "SYSTEM", "TOOL", "SKILL", "FILE", "CONCEPT"
]


class ExtractedEntity(BaseModel):
    """One entity as the model returns it."""

    name: str = Field(min_length=1, max_length=80)
    type: EntityType
    aliases: list[str] = []
    facts: list[str] = []
    confidence: float = Field(ge=0, le=1)
    evidence: str = ""
    normalization_notes: str = ""


#: Structured Outputs schema (strict: every property required, nothing else allowed).
ENTITY_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "user_entities",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["entities"],
            "properties": {
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": [
                            "name", "type", "aliases", "facts", "confidence", "evidence", "normalization_notes"
                        ],
                        "properties": {
                            "name": {"type": "string"},
                            "type": {"type": "string", "enum": list(ENTITY_TYPES)},
                            "aliases": {"type": "array", "items": {"type": "string"}},
                            "facts": {"type": "array", "items": {"type": "string"}},
                            "confidence": {"type": "number"},
                            "evidence": {"type": "string"},
                            "normalization_notes": {"type": "string"},
                        },
                    },
                }
            },
        },
    },
}


def parse_entities(text: str) -> tuple[list[ExtractedEntity], int]:
    """Parse the model's answer; return the valid entities and how many items were malformed."""
    return valid_items(text, "entities", ExtractedEntity)


def render_entity_request(known: list[Entity], facts: list[Fact]) -> str:
    """Return pass 2's request: the known entities (so names stay canonical), then the facts
    as `[key] value`, each value an inert JSON string."""
    lines = ["Known entities:"]
    for entity in known[:MAX_KNOWN_LISTED]:
        also = f", also: {', '.join(entity.aliases)}" if entity.aliases else ""
        lines.append(f"- {entity.name} ({entity.type}){also}")
    if len(lines) == 1:
        lines.append("(none)")
    lines += ["", "Facts:"]
    lines += [f"- [{f.key}] {inert(f.value)}" for f in facts]
    return "\n".join(lines)


def extract_entities(
    llm: LLMClient, prompt: Prompt, text: str, *, model: str | None = None
) -> tuple[list[ExtractedEntity], Completion]:
    """Ask the model for the entities in `text` (a rendered request); raise LLMUnavailable."""
    completion = llm.complete(
        [{"role": "system", "content": prompt.text}, {"role": "user", "content": text}],
        purpose="entities",
        prompt_ref=prompt.ref,
        model=model,
        max_tokens=900,
        response_format=ENTITY_SCHEMA,
        temperature=0,
    )
    items, malformed = parse_entities(completion.text)
    if malformed:
        log.warning("entities.malformed", items_malformed=malformed)
    return items, completion


def mentions_from(items: list[ExtractedEntity], facts: list[Fact]) -> list[Mention]:
    """Turn the model's entities into mentions of the facts read; an entity whose fact keys
    are missing or unknown is tied to the facts whose value names it (else dropped)."""
    read = {f.key: f for f in facts}
    out = []
    for item in items:
        keys = tuple(k for k in dict.fromkeys(item.facts) if k in read)
        if not keys:
            name = comparable(item.name)
            keys = tuple(k for k, f in read.items() if name and f" {name} " in f" {comparable(f.value)} ")
        if keys:
            out.append(Mention(item.name, item.type, keys, tuple(a for a in item.aliases if a.strip()),
                               item.confidence))
    return out


@dataclass(frozen=True)
class EntityRules:
    """Consolidation settings (ENTITY_MERGE_SIMILARITY, ENTITY_MIN_CONFIDENCE, ENTITY_MAX_PER_USER)."""

    merge_similarity: float = 0.9
    min_confidence: float = 0.6
    max_entities: int = 200

    @classmethod
    def from_settings(cls, settings: Any) -> "EntityRules":
        """Return the rules the settings give."""
        return cls(settings.ENTITY_MERGE_SIMILARITY, settings.ENTITY_MIN_CONFIDENCE, settings.ENTITY_MAX_PER_USER)


@dataclass
class EntityResult:
    """What one pass-2 run did."""

    status: str  # stored, nothing_new, discarded (erased, opted out or taken over meanwhile)
    read: int = 0
    left: int = 0  # facts still to read: the job queues its follow-up
    stats: AbsorbStats = field(default_factory=AbsorbStats)
    completion: Completion | None = None  # the model call, for usage accounting


def user_facts(facts: FactStore, user: str) -> dict[str, Fact]:
    """Return the facts entities are read from: the user's, and the session's over them."""
    return {**facts.load(user, "user"), **facts.load(user, "session")}


def read_entities(
    user: str,
    token: str,
    facts: FactStore,
    entities: EntityStore,
    llm: LLMClient,
    prompt: Prompt,
    *,
    model: str | None,
    rules: EntityRules,
) -> EntityResult:
    """Read the entities of the facts added or changed since last read, in one call, and
    fold them into the user's entities; drop the edges of deleted facts."""
    current = user_facts(facts, user)
    state = entities.load(user)
    changed, gone = state.unread(current, prompt.version)
    if not changed and not gone:
        return EntityResult(status="nothing_new")
    batch = [current[k] for k in changed[:MAX_FACTS_PER_CALL]]
    mentions: list[Mention] = []
    completion = None
    if batch:
        items, completion = extract_entities(
            llm, prompt, render_entity_request(list(state.entities.values()), batch), model=model
        )
        mentions = mentions_from(items, batch)
    read = {fact_hash(f) for f in batch}
    stats = AbsorbStats()

    def change(now: EntityState) -> EntityState:
        nonlocal stats
        merged, stats = absorb(
            now.entities, mentions, [*(f.key for f in batch), *gone],
            similarity=rules.merge_similarity, min_confidence=rules.min_confidence, max_entities=rules.max_entities,
        )
        # keep the hashes of facts as they stand (a changed fact's old value goes), if read
        # with this prompt: another version's reads count for nothing
        still = {fact_hash(f) for f in current.values()} if now.prompt_version == prompt.version else set()
        return EntityState(entities=merged, read=(now.read & still) | read, prompt_version=prompt.version)

    if entities.update(user, token, change) is None:
        log.info("entities.discarded", reason="erased_opted_out_or_superseded")
        return EntityResult(status="discarded", read=len(batch), completion=completion)
    left = len(changed) - len(batch)
    log.info("entities.stored", facts_read=len(batch), facts_gone=len(gone), left=left, **stats.as_dict())
    return EntityResult(status="stored", read=len(batch), left=left, stats=stats, completion=completion)
