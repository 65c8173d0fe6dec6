"""The stand-in's entity extraction (pass 2 of fact extraction): named things in facts, no model."""

from __future__ import annotations

import json

import pytest

from bot.dev.standin_entities import ENTITY_SCHEMA_NAME, TYPES, extract_request_entities

EXAMPLE = """Known entities:
- Rex (PET), also: Rexy
- Ana Silva (PERSON)

Facts:
- [dog_name] "Rex"
- [partner] "my wife Ana Silva, a nurse"
- [employer] "works at Google in Lisbon"
- [allergies] "peanuts"
"""
FIELDS = {"name", "type", "aliases", "facts", "confidence", "evidence", "normalization_notes"}


def req(*facts: tuple[str, str], known: list[str] | None = None) -> str:
    """Build a request in the app's format; fact values as JSON string literals."""
    lines = ["Known entities:"] + ([f"- {k}" for k in known] if known else ["(none)"])
    lines += ["", "Facts:"] + [f"- [{key}] {json.dumps(value)}" for key, value in facts]
    return "\n".join(lines)


def brief(text: str) -> list[tuple[str, str, list[str]]]:
    """(name, type, facts) of every entity found, in order."""
    return [(e["name"], e["type"], e["facts"]) for e in extract_request_entities(text)]


def by_name(text: str) -> dict[str, dict]:
    return {e["name"]: e for e in extract_request_entities(text)}


def test_schema_name() -> None:
    assert ENTITY_SCHEMA_NAME == "user_entities"


def test_example_request() -> None:
    assert brief(EXAMPLE) == [
        ("Rex", "PET", ["dog_name"]),
        ("Ana Silva", "PERSON", ["partner"]),
        ("Google", "ORG", ["employer"]),
        ("Lisbon", "PLACE", ["employer"]),
    ]


def test_output_shape() -> None:
    entities = extract_request_entities(EXAMPLE)
    for entity in entities:
        assert set(entity) == FIELDS
        assert entity["type"] in TYPES
        assert isinstance(entity["aliases"], list) and isinstance(entity["facts"], list)
        assert 0.0 < entity["confidence"] <= 1.0
        assert isinstance(entity["evidence"], str) and entity["evidence"]
        assert isinstance(entity["normalization_notes"], str)
    found = {e["name"]: e for e in entities}
    assert found["Rex"]["aliases"] == ["Rexy"]  # the known alias is kept
    assert found["Ana Silva"]["evidence"] == "my wife Ana Silva"
    assert found["Google"]["evidence"] == "works at Google"
    assert found["Lisbon"]["evidence"] == "in Lisbon"


def test_allergies_give_nothing() -> None:
    assert extract_request_entities(req(("allergies", "peanuts"), ("allergies_2", "Peanuts"))) == []


def test_no_known_entities() -> None:
    text = req(("dog_name", "Rex"), ("city", "Porto"))
    assert "(none)" in text
    assert brief(text) == [("Rex", "PET", ["dog_name"]), ("Porto", "PLACE", ["city"])]
    assert all(e["aliases"] == [] and e["normalization_notes"] == "" for e in extract_request_entities(text))


def test_short_name_expands_to_known_entity() -> None:
    entity = by_name(req(("sister", "Ana"), known=["Ana Silva (PERSON)"]))["Ana Silva"]
    assert entity["type"] == "PERSON" and entity["facts"] == ["sister"]
    assert entity["aliases"] == ["Ana"]
    assert "Ana Silva" in entity["normalization_notes"]


def test_known_alias_and_known_name_in_free_text() -> None:
    text = req(("likes", "walking Rexy on Sundays"), ("hobby", "cooking with Ana Silva"),
               known=["Rex (PET), also: Rexy", "Ana Silva (PERSON)"])
    found = by_name(text)
    assert list(found) == ["Rex", "Ana Silva"]
    assert found["Rex"]["type"] == "PET" and found["Rex"]["facts"] == ["likes"]
    assert "alias" in found["Rex"]["normalization_notes"]


def test_short_name_expands_from_another_fact() -> None:
    text = req(("partner", "my wife Ana Silva"), ("friend", "Ana"))
    assert brief(text) == [("Ana Silva", "PERSON", ["partner", "friend"])]
    assert by_name(text)["Ana Silva"]["aliases"] == ["Ana"]


def test_mentions_merge_across_facts() -> None:
    text = req(("city", "Lisbon"), ("employer", "works at Google in Lisbon"))
    assert brief(text) == [("Lisbon", "PLACE", ["city", "employer"]), ("Google", "ORG", ["employer"])]


@pytest.mark.parametrize("key, value, expected", [
    ("cat_name", "Mimi", [("Mimi", "PET")]),
    ("pets", "a dog named Rex and a cat called Tom", [("Rex", "PET"), ("Tom", "PET")]),
    ("family", "my sister Ana and my brother João", [("Ana", "PERSON"), ("João", "PERSON")]),
    ("friends", "Maria and João Pedro", [("Maria", "PERSON"), ("João Pedro", "PERSON")]),
    ("doctor", "Dr. Costa", [("Costa", "PERSON")]),
    ("hometown", "São Paulo, Brazil", [("São Paulo", "PLACE"), ("Brazil", "PLACE")]),
    ("moved", "moved to Berlin in March", [("Berlin", "PLACE")]),
    ("school", "University of Lisbon", [("University of Lisbon", "ORG")]),
    ("occupation", "nurse at Hospital São João", [("Hospital São João", "ORG")]),
    ("languages", "Portuguese and English", [("Portuguese", "SKILL"), ("English", "SKILL")]),
    ("mother_tongue", "Portuguese", [("Portuguese", "SKILL")]),
    ("phone", "iPhone 15 Pro", [("iPhone 15 Pro", "PRODUCT")]),
    ("project", "Atlas", [("Atlas", "PROJECT")]),
    ("partner", "Ana, a nurse at Clinica Luz", [("Ana", "PERSON")]),  # not the workplace as a person
    ("likes", "Italian food and jazz", []),
    ("nationality", "Portuguese", []),
    ("fluent", "fluent in Python", [("Python", "SKILL")]),  # not a PLACE
    ("education", "a degree in Computer Science", []),
    ("work", "works in Porto", [("Porto", "PLACE")]),
    ("dog_breed", "Golden Retriever", []),  # a breed is not a pet's name
])
def test_single_fact(key: str, value: str, expected: list[tuple[str, str]]) -> None:
    assert [(n, t) for n, t, _ in brief(req((key, value)))] == expected


def test_generic_facts_give_nothing() -> None:
    text = req(("doctor", "the doctor"), ("boss", "my boss"), ("pets", "a dog"), ("storage", "Storage"),
               ("birthday", "March 3, 1990"), ("age", "34"), ("likes", "coffee and Italian food"),
               ("schedule", "gym on Mondays"), ("mother", "Mom"))
    assert extract_request_entities(text) == []


def test_the_user_is_never_an_entity() -> None:
    text = req(("name", "Ana Costa"), ("full_name", "Ana Costa"), ("friend", "Ana Costa"))
    assert extract_request_entities(text) == []


@pytest.mark.parametrize("text", [
    "",
    "hello there",
    "Known entities:\n- Rex (PET)",  # no Facts: section
    "Facts:\n- [dog_name] Rex\n- [city] {not json\n- [pet] 42\n- [pet] [\"Rex\"]\n- garbage\n- [] \"\"",
    "Known entities:\n- broken line\n- Rex (WHATEVER)\n\nFacts:\n- [partner] null",
    "Facts:\n- [x] " + "[" * 5000,
])
def test_malformed_requests_give_nothing(text: str) -> None:
    assert extract_request_entities(text) == []


def test_deterministic() -> None:
    assert extract_request_entities(EXAMPLE) == extract_request_entities(EXAMPLE)
