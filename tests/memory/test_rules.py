"""Fact rules (docs/memory.md): key normalization and the storage rules; pure functions."""

from __future__ import annotations

import pytest

from bot.memory.rules import merge_facts, normalize_key
from bot.storage.records import Fact
from tests.conftest import fact

NOW = 1000.0


def merge(existing: dict[str, Fact], *incoming: Fact, max_facts: int = 50):  # type: ignore[no-untyped-def]
    return merge_facts(existing, list(incoming), threshold=0.7, max_facts=max_facts, conflict_margin=0.1, now=NOW)


# -- normalization -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, key",
    [
        ("home city", "city"), ("Current City", "city"), ("city", "city"), ("user_city", "city"),
        ("city of residence", "city"), ("First Name", "name"), ("food allergy", "allergies"),
        ("Job title", "occupation"), ("my dog", "pets"), ("Favourite cuisine", "favourite_cuisine"),
    ],
)
def test_keys_do_not_fork(raw: str, key: str) -> None:
    assert normalize_key(raw) == key


# -- storage rules -----------------------------------------------------------------------
def test_confidence_threshold() -> None:
    result = merge({}, fact("name", "Ana", confidence=0.69), fact("city", "Lisbon", confidence=0.7))
    assert set(result.upserts) == {"city"}
    assert result.stats.rejected_low_confidence == 1 and result.stats.stored == 1


def test_higher_confidence_replaces_and_keeps_history() -> None:
    old = fact("city", "Lisbon", confidence=0.8, created_at=1.0)
    result = merge({"city": old}, fact("city", "Porto", confidence=0.9))
    new = result.upserts["city"]
    assert new.value == "Porto" and new.created_at == 1.0 and new.updated_at == NOW
    assert new.previous[0]["value"] == "Lisbon"


def test_equal_confidence_newer_wins_but_stays_flagged() -> None:
    result = merge({"city": fact("city", "Lisbon", confidence=0.9)}, fact("city", "Berlin", confidence=0.9))
    city = result.upserts["city"]
    assert city.value == "Berlin" and city.conflict["value"] == "Lisbon"  # picked, not silently


def test_clearly_more_confident_update_is_not_a_conflict() -> None:
    result = merge({"city": fact("city", "Lisbon", confidence=0.75)}, fact("city", "Berlin", confidence=0.95))
    assert result.upserts["city"].conflict is None and result.stats.conflicts == 0


def test_list_keys_accumulate_instead_of_replacing() -> None:
    existing = {"allergies": fact("allergies", "peanuts", category="health")}
    result = merge(existing, fact("allergies", "shellfish", category="health"), fact("allergies", "Peanuts"))
    assert result.upserts["allergies"].value == "peanuts, shellfish"
    assert result.stats.duplicates == 1


def test_merge_does_not_change_its_inputs() -> None:
    """A WATCH retry calls merge again with the same facts; nothing may leak between tries."""
    incoming = fact("city", "Porto", confidence=0.95)
    merge({"city": fact("city", "Lisbon", confidence=0.8)}, incoming)
    assert incoming.previous == [] and incoming.created_at == 0.0
    again = merge({}, incoming)
    assert again.upserts["city"].previous == []


def test_operator_fact_is_stored_even_if_the_value_exists_elsewhere() -> None:
    existing = {"city": fact("city", "Lisbon", category="location")}
    result = merge(existing, fact("office_city", "Lisbon", category="location", source="operator", confidence=1.0))
    assert "office_city" in result.upserts


def test_close_lower_confidence_is_flagged_not_picked() -> None:
    result = merge({"city": fact("city", "Lisbon", confidence=0.9)}, fact("city", "Porto", confidence=0.85))
    kept = result.upserts["city"]
    assert kept.value == "Lisbon" and kept.conflict["value"] == "Porto"
    assert result.stats.conflicts == 1


def test_far_lower_confidence_is_ignored() -> None:
    result = merge({"city": fact("city", "Lisbon", confidence=0.99)}, fact("city", "Porto", confidence=0.75))
    assert "city" not in result.upserts and result.stats.conflicts == 1


@pytest.mark.parametrize("source", ["explicit", "operator"])
def test_auto_never_replaces_explicit_or_operator(source: str) -> None:
    old = fact("name", "Ana", confidence=0.8, source=source)
    result = merge({"name": old}, fact("name", "Anna", confidence=0.99))
    assert result.upserts["name"].value == "Ana"
    assert result.upserts["name"].conflict["value"] == "Anna"


def test_explicit_replaces_auto() -> None:
    result = merge({"name": fact("name", "Anna", confidence=0.95)}, fact("name", "Ana", confidence=0.9, source="explicit"))
    assert result.upserts["name"].value == "Ana" and result.upserts["name"].source == "explicit"


def test_no_duplicate_values() -> None:
    existing = {"city": fact("city", "Lisbon", confidence=0.8, category="location")}
    result = merge(existing, fact("city", "lisbon.", confidence=0.95), fact("home_town", "Lisbon", category="location"))
    assert result.stats.duplicates == 2 and result.stats.stored == 0
    assert set(result.upserts) == {"city"} and result.upserts["city"].confidence == 0.95


def test_restating_the_value_settles_a_conflict() -> None:
    old = fact("city", "Lisbon", conflict={"value": "Porto", "confidence": 0.85})
    assert merge({"city": old}, fact("city", "Lisbon")).upserts["city"].conflict is None


def test_pruning_drops_least_important_automatic_facts() -> None:
    existing = {f"k{i}": fact(f"k{i}", f"v{i}", importance=i / 10) for i in range(5)}
    existing["op"] = fact("op", "x", importance=0.0, source="operator")
    result = merge(existing, fact("new", "value", importance=0.9), max_facts=5)
    assert sorted(result.deletes) == ["k0", "k1"]
    assert "new" in result.upserts and result.stats.pruned == 2
