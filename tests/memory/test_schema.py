"""Parsing the extraction model's output (docs/memory.md): strict, then lenient; never raises."""

from __future__ import annotations

import pytest

import json

from bot.memory.schema import EXTRACTION_SCHEMA, parse_extraction


# -- parsing the model's output ----------------------------------------------------------------
ITEM = '{"key": "name", "value": "Ana", "category": "identity", "confidence": 0.9, "importance": 0.9, "scope": "user", "explicit": false}'


@pytest.mark.parametrize(
    "text",
    [
        '{"facts": [' + ITEM + "]}",
        "```json\n{\"facts\": [" + ITEM + "]}\n```",
        "Sure! Here are the facts: {\"facts\": [" + ITEM + "]} Hope this helps.",
        "[" + ITEM + "]",
    ],
    ids=["strict", "fenced", "prose", "bare-list"],
)
def test_lenient_parser_recovers_facts(text: str) -> None:
    facts, bad = parse_extraction(text)
    assert [(f.key, f.value) for f in facts] == [("name", "Ana")] and bad == 0


@pytest.mark.parametrize("text", ["", "no facts here", "{not json", '{"facts": "nope"}', "null", '{"facts": [1, {}]}'])
def test_bad_output_never_raises(text: str) -> None:
    facts, _bad = parse_extraction(text)
    assert facts == []


def test_invalid_items_are_skipped_one_by_one() -> None:
    bad_item = ITEM.replace('"confidence": 0.9', '"confidence": 7')
    facts, bad = parse_extraction('{"facts": [' + ITEM + "," + bad_item + "]}")
    assert len(facts) == 1 and bad == 1


@pytest.mark.parametrize(
    ("stability", "scope", "stored_in"),
    [("ephemeral", "user", "session"), ("static", "session", "user"), ("dynamic", "session", "user"),
     ("unknown", "session", "session"), ("unknown", "user", "user")],
)
def test_temporal_stability_decides_the_scope(stability: str, scope: str, stored_in: str) -> None:
    item = {"key": "plans", "value": "x", "confidence": 0.9, "importance": 0.5, "scope": scope,
            "temporal_stability": stability}
    [fact], bad = parse_extraction(json.dumps({"facts": [item]}))
    assert bad == 0 and fact.target_scope == stored_in


def test_the_schema_asks_for_temporal_stability() -> None:
    item = EXTRACTION_SCHEMA["json_schema"]["schema"]["properties"]["facts"]["items"]
    assert "temporal_stability" in item["required"]
    assert item["properties"]["temporal_stability"]["enum"] == ["static", "dynamic", "ephemeral", "unknown"]
