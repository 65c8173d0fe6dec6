"""A user's named entities (docs/entities.md): what they are, and how a new mention joins them.

Each entity is a canonical name and type, with the aliases the user uses, the facts that
mention it (MENTIONS) and the entities it shares facts with (RELATED, weighted). Pass 2 of
extraction reads facts and names the entities in them; `absorb` folds its answer into the
user's entities, so that one thing mentioned many ways stays one entity:

- same normalized key (`PET:rex`), or a name equal to a known alias: the same entity;
- same type and a close spelling (rapidfuzz ratio >= ENTITY_MERGE_SIMILARITY, 0.9): an alias;
- a first name alone that starts exactly one known full name of that type ("Matt" and
  "Matt Joyce"): an alias; the fuller name becomes the canonical one.

A fact read again or deleted drops its edges first; an entity no fact mentions goes.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

from rapidfuzz import fuzz

from bot.memory.lexicon import TITLES
from bot.memory.names import comparable, entity_key, initials
from bot.storage.entities import Entity, relate

#: Pass 2's types: person, place, organization, and what WhatsApp users talk about (PET, PRODUCT, EVENT).
ENTITY_TYPES = (
    "PERSON", "PET", "PLACE", "ORG", "PRODUCT", "PROJECT", "EVENT", "SYSTEM", "TOOL", "SKILL", "FILE", "CONCEPT",
)
#: The aliases one entity keeps (the newest go first when over).
MAX_ALIASES = 6
#: Words that make a name generic ("the doctor", "my boss"): never an entity.
_GENERIC_START = re.compile(r"^(the|a|an|my|our|your|his|her|their|this|that|some)\s", re.IGNORECASE)
_NOT_A_NAME = re.compile(
    r"^[\d\s.,:/-]*$|^(mon|tues|wednes|thurs|fri|satur|sun)day$|^(today|tomorrow|yesterday|tonight)$", re.IGNORECASE
)


@dataclass(frozen=True)
class Mention:
    """One entity as pass 2 named it, in the facts it read."""

    name: str
    type: str
    facts: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    confidence: float = 1.0


@dataclass
class AbsorbStats:
    """What one absorb changed."""

    added: int = 0
    merged: int = 0
    removed: int = 0
    rejected: int = 0

    def as_dict(self) -> dict[str, int]:
        """Return the counts by name."""
        return asdict(self)


def is_specific(name: str) -> bool:
    """Return whether a name names one thing: not generic ("the doctor"), a date or a number."""
    name = name.strip()
    return len(name) >= 2 and not _GENERIC_START.match(name) and not _NOT_A_NAME.match(name)


def _same_thing(entity: Entity, mention: Mention, similarity: float) -> bool:
    """Return whether a mention names this entity (same type): by name, alias or spelling."""
    if entity.type != mention.type:
        return False
    known = {comparable(n) for n in entity.names()}
    said = {comparable(n) for n in (mention.name, *mention.aliases)}
    if known & said:
        return True
    canonical = comparable(entity.name)
    return fuzz.ratio(canonical, comparable(mention.name)) >= similarity * 100


#: Titles set aside when a short form is compared with a full name ("Dr Matusse").
_TITLES = TITLES | {"miss", "herr", "frau"}


def _short_form_of(short: str, full: str) -> bool:
    """Return whether `short` names `full` in fewer words: its first or last word(s), a
    title set aside ("Matt", "Reverdin", "Dr Matusse"), or its initials ("DPMB", "UEM")."""
    a = [w for w in comparable(short).split() if w not in _TITLES]
    b = comparable(full).split()
    if not a or len(a) >= len(b):
        return False
    if b[: len(a)] == a or b[-len(a) :] == a:
        return True
    plain = short.strip()
    return (len(a) == 1 and 2 <= len(plain) <= 6 and plain.isupper()
            and a[0] in (initials(full.split()), initials(full.split(), capitals_only=True)))


def _join(entity: Entity, mention: Mention) -> None:
    """Fold a mention into its entity: the fuller name wins, the others become aliases."""
    names = [*entity.names(), mention.name, *mention.aliases]
    if _short_form_of(entity.name, mention.name):
        entity.name = mention.name
    seen = {comparable(entity.name)}
    aliases = []
    for name in names:
        c = comparable(name)
        if c and c not in seen:
            seen.add(c)
            aliases.append(name.strip())
    entity.aliases = aliases[-MAX_ALIASES:]
    entity.confidence = max(entity.confidence, mention.confidence)
    entity.facts = list(dict.fromkeys([*entity.facts, *mention.facts]))


def _find(entities: dict[str, Entity], mention: Mention, similarity: float) -> Entity | None:
    """Return the known entity a mention names, if any."""
    direct = entities.get(entity_key(mention.type, mention.name))
    if direct is not None:
        return direct
    for entity in entities.values():
        if _same_thing(entity, mention, similarity):
            return entity
    shorter = [e for e in entities.values() if e.type == mention.type and _short_form_of(mention.name, e.name)]
    longer = [e for e in entities.values() if e.type == mention.type and _short_form_of(e.name, mention.name)]
    if len(shorter) == 1 and not longer:
        return shorter[0]
    if len(longer) == 1 and not shorter:
        return longer[0]
    return None


def absorb(
    entities: dict[str, Entity],
    mentions: Iterable[Mention],
    reread: Iterable[str],
    *,
    similarity: float,
    min_confidence: float,
    max_entities: int,
) -> tuple[dict[str, Entity], AbsorbStats]:
    """Return the user's entities after pass 2 read the facts `reread` (changed or deleted
    ones too) and named `mentions` in them; the input is not changed."""
    stats = AbsorbStats()
    gone = set(reread)
    out: dict[str, Entity] = {}
    for entity in entities.values():
        copy = Entity(entity.key, entity.name, entity.type, list(entity.aliases), entity.confidence,
                      [f for f in entity.facts if f not in gone])
        out[copy.key] = copy
    for mention in mentions:
        if mention.type not in ENTITY_TYPES or not is_specific(mention.name) or mention.confidence < min_confidence:
            stats.rejected += 1
            continue
        found = _find(out, mention, similarity)
        if found is None:
            fresh = Entity(entity_key(mention.type, mention.name), mention.name.strip(), mention.type, [], mention.confidence, [])
            _join(fresh, mention)
            out[fresh.key] = fresh
            stats.added += 1
            continue
        old_key = found.key
        _join(found, mention)
        found.key = entity_key(found.type, found.name)
        if found.key != old_key:  # the fuller name became canonical: rekey
            out.pop(old_key)
            out[found.key] = found
        stats.merged += 1
    for key in [k for k, e in out.items() if not e.facts]:
        del out[key]
        stats.removed += 1
    if len(out) > max_entities:  # keep the most mentioned, then the most certain
        keep = sorted(out.values(), key=lambda e: (-len(e.facts), -e.confidence, e.key))[:max_entities]
        stats.removed += len(out) - len(keep)
        out = {e.key: e for e in keep}
    relate(out)
    return out, stats
