"""A shared location kept as the session fact `current_location`: the user's own word for
where they are now, so it replaces the previous one outright and expires with the session
(SESSION_FACTS_TTL_HOURS)."""

from __future__ import annotations

import time
from dataclasses import replace

from bot.media.location import LOCATION_FACT, Location, place
from bot.memory.rules import MergeResult, MergeStats
from bot.storage.facts import FactStore
from bot.storage.records import Fact

#: What a fact from a shared location says of its origin.
PROVENANCE = "shared_location"


def location_fact(location: Location, now: float) -> Fact:
    """Return the session fact a shared location leaves."""
    return Fact(
        key=LOCATION_FACT, value=place(location)[:300], category="location", confidence=1.0, importance=0.7,
        source="explicit", created_at=now, updated_at=now, provenance=PROVENANCE,
    )


def remember_location(facts: FactStore, user: str, location: Location) -> Fact:
    """Store the location as the user's current_location (session scope); return the fact.
    Raise StoreUnavailable when Redis cannot."""
    now = time.time()
    fact = location_fact(location, now)

    def merge(existing: dict[str, Fact]) -> MergeResult:
        previous = existing.get(LOCATION_FACT)
        stored = replace(fact, created_at=previous.created_at) if previous and previous.value == fact.value else fact
        return MergeResult(upserts={LOCATION_FACT: stored}, deletes=[], stats=MergeStats())

    facts.merge(user, "session", merge, count_stats=False)
    return fact
