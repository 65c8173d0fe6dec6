"""Durable user facts (docs/memory.md): key normalization and the storage rules
(threshold, conflicts, deduplication, list-valued keys, pruning).

Everything here is pure: it takes facts and candidates and returns what to write.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from bot.config import Settings
from bot.storage.records import HISTORY_KEEP, Fact

CATEGORIES = (
    "identity",  # name, age, pronouns, language
    "location",  # city, country, neighbourhood, timezone
    "preference",  # likes, dislikes, style, budget
    "diet",  # vegetarian, halal…
    "health",  # allergies, conditions that matter for advice
    "work",  # occupation, employer, studies
    "family",  # partner, children, pets
    "contact",  # email, preferred contact time
    "schedule",  # plans and dates
    "other",
)
#: Facts a person gave on purpose outrank what the model inferred.
PROTECTED_SOURCES = frozenset({"explicit", "operator"})
#: Keys that hold several things at once: a new value is added, never a replacement
#: (a second allergy must not push the first out of the prompt).
LIST_KEYS = frozenset({"allergies", "pets", "children", "languages", "dislikes", "medications"})
LIST_SEPARATOR = ", "

# Key normalization: lower-case words joined by "_", qualifiers dropped, synonyms folded,
# so "home city", "current city" and "City" are all `city`.
_QUALIFIERS = ("user", "users", "my", "the", "current", "home", "primary", "main", "preferred", "usual")
_SYNONYMS = {
    "city_of_residence": "city", "residence": "city", "lives_in": "city", "location": "city",
    "town": "city", "place_of_residence": "city", "residence_city": "city",
    "first_name": "name", "full_name": "name", "given_name": "name",
    "dietary_preference": "diet", "dietary_restriction": "diet", "dietary_preferences": "diet",
    "allergy": "allergies", "food_allergy": "allergies", "food_allergies": "allergies", "allergic_to": "allergies",
    "job": "occupation", "profession": "occupation", "job_title": "occupation", "role": "occupation",
    "employer": "employer", "company": "employer", "workplace": "employer",
    "spouse": "partner", "wife": "partner", "husband": "partner", "boyfriend": "partner", "girlfriend": "partner",
    "date_of_birth": "birthday", "dob": "birthday", "birth_date": "birthday",
    "email_address": "email", "mail": "email",
    "native_language": "language", "spoken_language": "language",
    "number_of_children": "children", "kids": "children",
    "pet": "pets", "dog": "pets", "cat": "pets",
}


#: The category of a canonical key, for facts given without one (operators, org files).
KEY_CATEGORIES = {
    "name": "identity", "age": "identity", "pronouns": "identity", "language": "identity",
    "nationality": "identity", "gender": "identity", "nickname": "identity",
    "city": "location", "country": "location", "neighbourhood": "location", "neighborhood": "location",
    "address": "location", "timezone": "location", "hometown": "location",
    "diet": "diet", "allergies": "health", "medications": "health", "conditions": "health",
    "occupation": "work", "employer": "work", "studies": "work",
    "partner": "family", "children": "family", "pets": "family",
    "email": "contact", "contact_time": "contact",
    "birthday": "schedule", "likes": "preference", "dislikes": "preference", "budget": "preference",
}


def category_for(key: str) -> str:
    """Return the category a normalized key implies ("other" when none does); a pet's name
    (`dog_name`) is family, a favourite anything (`favourite_cuisine`) a preference."""
    if key in KEY_CATEGORIES:
        return KEY_CATEGORIES[key]
    if key.startswith(("favourite_", "favorite_")):
        return "preference"
    if key.endswith("_name") and key.removesuffix("_name") in ("dog", "cat", "pet", "puppy", "kitten"):
        return "family"
    return "other"


def normalize_key(raw: str) -> str:
    """Return the canonical fact key: snake_case, qualifiers dropped, synonyms folded."""
    key = re.sub(r"[^a-z0-9]+", "_", raw.lower()).strip("_")
    changed = True
    while changed and key:
        changed = False
        for qualifier in _QUALIFIERS:
            if key.startswith(qualifier + "_"):
                key = key[len(qualifier) + 1 :]
                changed = True
    key = _SYNONYMS.get(key, key)
    return key[:60] or "fact"


def normalize_value(value: str) -> str:
    """Return a value's comparison form: case-folded, spaces collapsed, end punctuation dropped."""
    return re.sub(r"\s+", " ", value.casefold()).strip().rstrip(".!,;")


@dataclass
class MergeStats:
    """What one merge did, added to the user's running stats."""

    extracted: int = 0
    stored: int = 0
    rejected_low_confidence: int = 0
    conflicts: int = 0
    duplicates: int = 0
    pruned: int = 0

    def as_dict(self) -> dict[str, int]:
        """Return the counters by name."""
        return asdict(self)

    @property
    def changed(self) -> bool:
        """Return whether the merge wrote or deleted any fact."""
        return bool(self.stored or self.conflicts or self.pruned)


@dataclass
class MergeResult:
    """Facts to write and delete, and the stats of the merge."""

    upserts: dict[str, Fact]
    deletes: list[str]
    stats: MergeStats


def merge_facts(
    existing: dict[str, Fact],
    incoming: list[Fact],
    *,
    threshold: float,
    max_facts: int,
    conflict_margin: float,
    now: float,
) -> MergeResult:
    """Apply the storage rules to incoming facts against the existing ones.

    - below `threshold` confidence: not stored;
    - same key, same value: a duplicate; confidence and importance only ever rise;
    - the same value already stored under another key of the same category: a duplicate;
    - same key, new value: an explicit or operator fact replaces an automatic one and is
      never replaced by one; between automatic facts the new value wins when its confidence
      is at least the old one's (newer wins ties); a person restating (explicit/operator)
      replaces their earlier word. The replaced value goes to `previous`. A losing value
      within `conflict_margin` of the winner (or losing only by rank) is kept on the fact
      as a flagged `conflict`;
    - over `max_facts`, the least important automatic facts are pruned first.
    """
    stats = MergeStats(extracted=len(incoming))
    facts = dict(existing)
    touched: dict[str, Fact] = {}
    # Work on copies: a WATCH retry calls this again with the same inputs.
    for new in (replace(f, previous=list(f.previous)) for f in incoming):
        if new.confidence < threshold:
            stats.rejected_low_confidence += 1
            continue
        old = facts.get(new.key)
        if old is None:
            same_elsewhere = new.source != "operator" and any(
                f.category == new.category and normalize_value(f.value) == normalize_value(new.value)
                for f in facts.values()
            )
            if same_elsewhere:
                stats.duplicates += 1
                continue
            new.created_at = new.updated_at = now
            facts[new.key] = touched[new.key] = new
            stats.stored += 1
            continue
        if new.key in LIST_KEYS and _rank(new.source) >= _rank(old.source):
            parts = [p.strip() for p in old.value.split(LIST_SEPARATOR) if p.strip()]
            if normalize_value(new.value) not in {normalize_value(p) for p in parts}:
                old.value = LIST_SEPARATOR.join(parts + [new.value.strip()])[:300]
                old.confidence = min(old.confidence, new.confidence) if old.source == new.source else new.confidence
                old.importance = max(old.importance, new.importance)
                old.source = new.source if _rank(new.source) > _rank(old.source) else old.source
                old.updated_at = now
                touched[old.key] = old
                stats.stored += 1
                continue
        if normalize_value(old.value) == normalize_value(new.value) or (
            new.key in LIST_KEYS
            and normalize_value(new.value) in {normalize_value(p) for p in old.value.split(LIST_SEPARATOR)}
        ):
            # Said again: a duplicate, never a second entry. It confirms the stored value,
            # so a pending conflict is settled in its favour.
            stats.duplicates += 1
            old.confidence = max(old.confidence, new.confidence)
            old.importance = max(old.importance, new.importance)
            if new.source in PROTECTED_SOURCES and old.source == "auto":
                old.source = new.source
            old.conflict = None
            old.updated_at = now
            touched[old.key] = old
            continue
        # A different value for a key we have. What a person said outranks what the model
        # inferred; among inferences the more confident wins, the newer on a tie; a person
        # restating a fact (explicit or operator again) is always the newer word.
        old_rank, new_rank = _rank(old.source), _rank(new.source)
        protected = old_rank > new_rank
        wins = new_rank > old_rank or (new_rank == old_rank and (new_rank > 0 or new.confidence >= old.confidence))
        if wins:
            history = [{"value": old.value, "confidence": old.confidence, "source": old.source, "until": now}]
            new.previous = (history + old.previous)[:HISTORY_KEEP]
            new.created_at = old.created_at or now
            new.updated_at = now
            new.conflict = None
            if new_rank == old_rank == 0 and new.confidence - old.confidence <= conflict_margin:
                # The newer value is picked, but not silently: the old one stays flagged.
                new.conflict = {"value": old.value, "confidence": old.confidence, "source": old.source, "at": now}
                stats.conflicts += 1
            facts[new.key] = touched[new.key] = new
            stats.stored += 1
            continue
        stats.conflicts += 1
        if protected or old.confidence - new.confidence <= conflict_margin:
            old.conflict = {"value": new.value, "confidence": new.confidence, "source": new.source, "at": now}
            old.updated_at = now
            touched[old.key] = old
    deletes = _prune(facts, max_facts)
    stats.pruned = len(deletes)
    for key in deletes:
        touched.pop(key, None)
    return MergeResult(upserts=touched, deletes=deletes, stats=stats)


def _rank(source: str) -> int:
    return 1 if source in PROTECTED_SOURCES else 0


def _prune(facts: dict[str, Fact], max_facts: int) -> list[str]:
    """Return the keys to drop so at most max_facts remain: automatic, least important first."""
    excess = len(facts) - max_facts
    if excess <= 0:
        return []
    order = sorted(
        facts.values(),
        key=lambda f: (f.source in PROTECTED_SOURCES, f.importance, f.confidence, f.updated_at),
    )
    dropped = [f.key for f in order[:excess]]
    for key in dropped:
        facts.pop(key)
    return dropped


@dataclass(frozen=True)
class FactRules:
    """The thresholds the storage rules use."""

    threshold: float = 0.7
    max_facts: int = 50
    conflict_margin: float = 0.1

    @classmethod
    def from_settings(cls, settings: Settings) -> "FactRules":
        """Return the rules the settings configure."""
        return cls(settings.EXTRACTION_CONFIDENCE, settings.MAX_FACTS_PER_USER, settings.CONFLICT_MARGIN)
