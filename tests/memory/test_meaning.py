"""Memory by meaning, with the real local model: facts embedded as they are written (1 bit
per dimension, in the same transaction), picked for a message by similarity in Portuguese,
Spanish and English where the English cue words pick nothing; vectors deleted, erased,
exported and re-embedded with their facts; words again when the model is down
(docs/semantic.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.dev.memory_evaluation import load_users, user_facts
from bot.memory.rules import merge_facts
from bot.observability.metrics import MESSAGE_EMBEDDINGS
from bot.storage.facts import MODEL_FIELD
from bot.storage import packed_facts
from bot.storage.keys import FACTS_PREFIX, VECTORS_PREFIX, user_key
from bot.users import memory as operations
from bot.users.lifecycle import erase_user
from bot.users.reports import export_user
from tests.conftest import USER
from tests.memory.test_entities_flow import memory_block_of_last_reply

pytestmark = [pytest.mark.integration, pytest.mark.embeddings, pytest.mark.cluster]

FACTS_KEY, VECTORS_KEY = user_key(FACTS_PREFIX, USER), user_key(VECTORS_PREFIX, USER)


def stored_vectors(client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Return the user's vectors as stored, with the model's field."""
    return packed_facts.read(client, FACTS_KEY, VECTORS_KEY)[1]


def remember(services, user_id: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """Store one labelled user's facts (eval memory's) as extraction stores them."""
    facts = user_facts(next(u for u in load_users() if u["id"] == user_id))
    services.facts.merge(USER, "user", lambda existing: merge_facts(
        existing, list(facts.values()), threshold=0.7, max_facts=50, conflict_margin=0.1, now=time.time()))
    return facts


@pytest.mark.parametrize(("user_id", "message", "wanted"), [
    ("m03", "q prenda dou ao pequenino no natal? vai ser o primeiro dele", {"nephew"}),
    ("m06", "hace 35 grados, lo saco a pasear al perro o mejor no?", {"dog_name", "dog_health"}),
    ("m09", "what stuff from my plate is toxic for kitties? caught him licking it earlier", {"cat_name"}),
])
def test_a_fact_is_picked_by_meaning_in_each_language(chat_with, model, services, redis_client, user_id: str,
                                                      message: str, wanted: set[str]) -> None:  # type: ignore[no-untyped-def]
    facts = remember(services, user_id)
    stored = stored_vectors(redis_client)
    assert stored[MODEL_FIELD] == services.settings.EMBEDDING_MODEL
    assert {k for k in stored if k != MODEL_FIELD} == {k for k, f in facts.items() if f.confidence >= 0.7}
    assert all(len(v) == 64 for k, v in stored.items() if k != MODEL_FIELD)  # 384 bits, base64
    chat_with()(message)
    by_meaning = memory_block_of_last_reply(model)
    assert all(f"- {key}:" in by_meaning for key in wanted)
    chat_with(EMBEDDING_MODEL="off")(message)  # the English cue words alone
    assert not all(f"- {key}:" in memory_block_of_last_reply(model) for key in wanted)


def test_with_the_model_down_facts_are_picked_by_category(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    remember(services, "m09")
    failed = MESSAGE_EMBEDDINGS.labels(outcome="failed")._value.get()
    reply = chat_with(EMBEDDING_BASE_URL="http://127.0.0.1:9/v1")("what should i cook for dinner tonight?")
    assert "<Message>" in reply
    assert MESSAGE_EMBEDDINGS.labels(outcome="failed")._value.get() == failed + 1
    assert "PERSISTENT MEMORY" in memory_block_of_last_reply(model)  # by the cue words, as before


def test_an_emoji_costs_no_embedding(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    remember(services, "m09")
    skipped = MESSAGE_EMBEDDINGS.labels(outcome="skipped")._value.get()
    chat_with()("👍🙏")
    assert MESSAGE_EMBEDDINGS.labels(outcome="skipped")._value.get() == skipped + 1


def test_vectors_follow_their_facts(services, redis_client, make_settings) -> None:  # type: ignore[no-untyped-def]
    settings = services.settings
    operations.set_fact(services.users, settings, USER, "dog_name", "Rex, a beagle")
    operations.set_fact(services.users, settings, USER, "city", "Porto")
    before = stored_vectors(redis_client)["dog_name"]
    operations.set_fact(services.users, settings, USER, "dog_name", "Bolacha, a golden retriever")
    assert stored_vectors(redis_client).get("dog_name") not in (None, before)  # the edit's vector
    assert operations.delete_fact(services.users, USER, "city")
    assert set(stored_vectors(redis_client)) == {MODEL_FIELD, "dog_name"}
    exported = export_user(services.users, USER)["fact_vectors"]
    assert exported["model"] == settings.EMBEDDING_MODEL and set(exported["vectors"]) == {"dog_name"}
    assert json.dumps(exported)  # plain JSON, as the export is written
    erase_user(services.users, USER, actor="test", via="cli")
    assert not redis_client.exists(FACTS_KEY) and not redis_client.exists(VECTORS_KEY)


def test_a_fact_written_while_the_model_is_down_is_reembedded_later(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot.services import build_services

    down = build_services(make_settings(EMBEDDING_BASE_URL="http://127.0.0.1:9/v1"))
    operations.set_fact(down.users, down.settings, USER, "diet", "vegetarian")
    assert down.facts.load(USER)["diet"].value == "vegetarian"  # stored all the same
    assert "diet" not in stored_vectors(redis_client)
    up = build_services(make_settings())
    assert operations.reembed_memory(up.users, [USER]) == {"users": 1, "facts": 1}
    assert stored_vectors(redis_client)[MODEL_FIELD] == up.settings.EMBEDDING_MODEL
    assert "diet" in stored_vectors(redis_client)
    assert up.facts.load(USER)["diet"].value == "vegetarian"


def test_vectors_of_another_model_are_never_compared(services, redis_client) -> None:  # type: ignore[no-untyped-def]
    operations.set_fact(services.users, services.settings, USER, "diet", "vegetarian")
    stored = stored_vectors(redis_client)
    query = services.embedder.embed(["o que janto hoje?"], deadline_s=5, purpose="test", kind="query")[0]
    assert set(services.facts.vectors.similarities(query, stored)) == {"diet"}
    assert services.facts.vectors.similarities(query, {**stored, MODEL_FIELD: "another-model"}) == {}
    # a write over another model's vectors replaces them all
    facts = packed_facts.read(redis_client, FACTS_KEY, VECTORS_KEY)[0]
    redis_client.set(FACTS_KEY, packed_facts.pack(facts, {MODEL_FIELD: "another-model", "diet": "A" * 64}))
    operations.set_fact(services.users, services.settings, USER, "city", "Porto")
    assert set(stored_vectors(redis_client)) == {MODEL_FIELD, "city"}
    assert stored_vectors(redis_client)[MODEL_FIELD] == services.settings.EMBEDDING_MODEL
    assert set(services.facts.load(USER)) == {"diet", "city"}


def test_fifty_facts_and_their_vectors_fit_in_8_kb(services, redis_client) -> None:  # type: ignore[no-untyped-def]
    facts = user_facts(next(u for u in load_users() if u["id"] == "m02"))
    services.facts.merge(USER, "user", lambda existing: merge_facts(
        existing, list(facts.values()), threshold=0.0, max_facts=50, conflict_margin=0.1, now=time.time()))
    assert len(services.facts.load(USER)) == 50 and len(stored_vectors(redis_client)) == 51  # each, and the model
    assert redis_client.type(FACTS_KEY) == "string" and not redis_client.exists(VECTORS_KEY)
    assert redis_client.memory_usage(FACTS_KEY, samples=0) <= 8 * 1024


def test_facts_stored_before_the_packed_string_read_and_are_packed_at_the_next_write(
        chat_with, model, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    remember(services, "m06")
    facts, vectors = packed_facts.read(redis_client, FACTS_KEY, VECTORS_KEY)
    redis_client.delete(FACTS_KEY)
    redis_client.hset(FACTS_KEY, mapping=facts)  # as every user was stored before
    redis_client.hset(VECTORS_KEY, mapping=vectors)
    assert services.facts.load(USER).keys() == facts.keys()
    chat_with()("hace 35 grados, lo saco a pasear al perro o mejor no?")  # the claim reads the hashes
    assert "- dog_health:" in memory_block_of_last_reply(model)
    operations.set_fact(services.users, services.settings, USER, "city", "Valencia")
    assert redis_client.type(FACTS_KEY) == "string" and not redis_client.exists(VECTORS_KEY)
    after, after_vectors = packed_facts.read(redis_client, FACTS_KEY, VECTORS_KEY)
    assert after.keys() == {*facts, "city"} and after_vectors.keys() == {*vectors, "city"}
