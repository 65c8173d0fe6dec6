"""Entities end to end (docs/entities.md): pass 2 on the burst RQ worker after fact extraction,
matching on the next message through the signed webhook, export and erase; the stand-in is
scripted over HTTP where an exact answer matters."""

from __future__ import annotations

import json

import pytest

from bot.dev.standin import StandinModel
from bot.storage.keys import ENTITIES_PREFIX, user_key
from bot.users.lifecycle import erase_user
from bot.users.reports import export_user
from tests.conftest import USER
from tests.memory.test_memory import EXTRACT_MARK, extracted

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: Only pass-2 requests carry this (bot/memory/entity_extraction.render_entity_request).
ENTITY_MARK = "Known entities:"

FACTS = [
    {"key": "dog_name", "value": "Rex, a beagle", "category": "family", "importance": 0.5},
    {"key": "dog_vet", "value": "Rex sees Dr. Costa at VetPlus on Fridays", "category": "family", "importance": 0.5},
    {"key": "allergies", "value": "peanuts", "category": "health", "importance": 0.95},
    # enough else, each more important than the dog, to fill a small memory block
    *[{"key": f"hobby_{i}", "value": f"long-distance trail running event number {i} in the mountains",
       "category": "preference", "importance": 0.9} for i in range(8)],
]


def entities_answer(*items: dict) -> dict:  # type: ignore[type-arg]
    full = [{"aliases": [], "confidence": 0.9, "evidence": "", "normalization_notes": "", **i} for i in items]
    return {"content": json.dumps({"entities": full}), "match": ENTITY_MARK}


@pytest.fixture
def chat(chat_with, run_worker):  # type: ignore[no-untyped-def]
    """(build, work): build(**settings) gives say() with a small memory block."""
    return (lambda **overrides: chat_with(EXTRACTION_INTERVAL=1, MEMORY_MAX_TOKENS=110, **overrides)), run_worker


def memory_block_of_last_reply(model: StandinModel) -> str:
    replies = [r for r in model.requests() if EXTRACT_MARK not in r["messages"][-1]["content"]
               and ENTITY_MARK not in r["messages"][-1]["content"]]
    return "\n".join(m["content"] for m in replies[-1]["messages"] if m["role"] == "system")


def learn_about_rex(say, work, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script(
        extracted(*FACTS),
        entities_answer(
            {"name": "Rex", "type": "PET", "facts": ["dog_name", "dog_vet"]},
            {"name": "Dr. Costa", "type": "PERSON", "facts": ["dog_vet"]},
            {"name": "VetPlus", "type": "ORG", "facts": ["dog_vet"]},
        ),
    )
    say("My beagle Rex sees Dr. Costa at VetPlus on Fridays; I'm allergic to peanuts and I run trails.")
    work()  # fact extraction, then pass 2 on the same worker


@pytest.mark.parametrize("entities_on", [True, False])
def test_a_nickname_brings_the_pets_facts_and_keeps_the_allergy(chat, model: StandinModel, entities_on: bool) -> None:  # type: ignore[no-untyped-def]
    build, work = chat
    say = build(ENTITIES_ENABLED=entities_on, EMBEDDING_MODEL="off")  # entities and words alone
    learn_about_rex(say, work, model)
    say("Is it ok to give Rexy chocolate?")
    block = memory_block_of_last_reply(model)
    assert "allergies" in block  # safety is never crowded out
    if entities_on:
        assert "dog_vet" in block and "dog_name" in block
    else:  # by category alone the dog's facts lose to the more important ones: what entities fix
        assert "dog_vet" not in block


@pytest.mark.embeddings
def test_meaning_brings_the_pets_facts_without_entities(chat, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    build, work = chat
    say = build(ENTITIES_ENABLED=False)  # no name matching: the local model's vectors alone
    learn_about_rex(say, work, model)
    say("my pup keeps scratching his ears, should I take him to someone?")
    block = memory_block_of_last_reply(model)
    assert "allergies" in block and "dog_vet" in block


def task_answer(*names: dict) -> dict:  # type: ignore[type-arg]
    body = {"task": "Say who voices Rex in Toy Story.", "depends_on_chat_history": False,
            "depends_on_user_memory": True, "entities": list(names)}
    return {"content": json.dumps(body), "match": "Known fact keys:"}


@pytest.mark.parametrize(
    ("named", "check", "kept"),
    [([], True, False),  # the model read "Rex in Toy Story" as the film's dinosaur: dropped
     ([{"name": "Rex", "type": "PET"}], True, True),  # the model says it is the dog: kept
     ([], False, True)],  # ENTITY_TASK_CHECK=false: the model only adds
)
def test_the_task_model_checks_one_word_matches(chat, model: StandinModel, named: list, check: bool, kept: bool) -> None:  # type: ignore[no-untyped-def,type-arg]
    build, work = chat
    say = build(TASK_EXTRACTION="on", ENTITY_TASK_CHECK=check, EMBEDDING_MODEL="off")  # the check alone
    model.script(task_answer())  # the first message's task call, before pass 2's answer is taken
    learn_about_rex(say, work, model)
    model.reset()
    model.script(task_answer(*named))
    say("Who voices Rex in Toy Story?")
    block = memory_block_of_last_reply(model)
    assert "allergies" in block
    assert ("dog_vet" in block) is kept


def test_pass_2_reads_only_what_changed_and_drops_deleted_facts(chat, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    build, work = chat
    say = build()
    learn_about_rex(say, work, model)
    state = services.entities.load(USER)
    assert set(state.entities) == {"PET:rex", "PERSON:dr costa", "ORG:vetplus"}
    assert state.entities["PET:rex"].facts == ["dog_name", "dog_vet"]
    assert state.entities["PET:rex"].related["ORG:vetplus"] == 0.75  # one shared fact
    model.reset()
    model.script(
        extracted({"key": "sister", "value": "my sister Ana lives in Porto", "category": "family"}),
        entities_answer({"name": "Ana", "type": "PERSON", "facts": ["sister"]},
                        {"name": "Porto", "type": "PLACE", "facts": ["sister"]}),
    )
    say("My sister Ana lives in Porto.")
    work()
    [request] = [r for r in model.requests() if ENTITY_MARK in r["messages"][-1]["content"]]
    sent = request["messages"][-1]["content"]
    assert "[sister]" in sent and "[dog_vet]" not in sent  # unchanged facts are never sent twice
    assert "- Rex (PET)" in sent  # known entities keep names canonical
    services.facts.delete(USER, "dog_vet")
    job = services.jobs.enqueue("entities", USER, services.store.take_trigger(USER, "entities"))
    assert job and work()
    state = services.entities.load(USER)
    assert "ORG:vetplus" not in state.entities and "PERSON:dr costa" not in state.entities  # no facts left
    assert state.entities["PET:rex"].facts == ["dog_name"]


def test_export_has_the_entities_and_erase_leaves_no_entity_key(chat, model: StandinModel, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    build, work = chat
    say = build()
    learn_about_rex(say, work, model)
    exported = export_user(services.users, USER)
    assert {e["key"] for e in exported["entities"]} == {"PET:rex", "PERSON:dr costa", "ORG:vetplus"}
    assert redis_client.exists(user_key(ENTITIES_PREFIX, USER))
    erase_user(services.users, USER, actor="test", via="test")
    assert not redis_client.exists(user_key(ENTITIES_PREFIX, USER))
