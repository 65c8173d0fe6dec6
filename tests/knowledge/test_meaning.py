"""The knowledge base searched by meaning, with the real local models (multilingual-e5-small
ranks, USE v3 gates; served as the Procfile's `embed` process serves them): a question in
other words, or in another language than the page, reaches the chunk that answers it; a
greeting or a joke gets nothing; a question about the business that no page answers gets
the nearest passages; with a hosted ranking model the local gate still decides; and with
the models off or down, words alone serve, as before (docs/semantic.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.knowledge.library import Library
from bot.knowledge.retrieval import Retriever
from bot.llm.embeddings import make_embedder, make_gate_embedder
from bot.storage.knowledge import KnowledgeStore
from tests.knowledge.test_message_path import reference_blocks, reply_requests

pytestmark = [pytest.mark.integration, pytest.mark.embeddings]

EVAL = Path(__file__).resolve().parents[2] / "bot" / "dev" / "eval_data" / "knowledge"


def retriever_for(settings, redis_client, *files: str) -> Retriever:  # type: ignore[no-untyped-def]
    """The production library and retriever (both models, as build_services wires them) over
    some of the eval's Portuguese pages."""
    embedder, gate = make_embedder(settings), make_gate_embedder(settings)
    store = KnowledgeStore(redis_client)
    library = Library(store, _counter(), settings, embedder, gate)
    for name in files:
        library.add((EVAL / name).read_bytes(), source=name, language="pt")
    return Retriever(store, _counter(), settings, embedder, gate)


def _counter():  # type: ignore[no-untyped-def]
    from bot.llm.tokens import TokenCounter

    return TokenCounter("gpt-4o-mini")


def injected(retriever: Retriever, question: str) -> str:
    return "\n".join(p.text for p in retriever.preview(question).picked)


FOUND_BY_MEANING = [
    # Portuguese in other words: the page says "se esqueceu de alguma coisa … guardamo-la durante 30 dias"
    ("quanto tempo guardam as coisas que a malta se esquece ai?", "guardamo-la durante 30 dias"),
    # Spanish, against a page that exists only in Portuguese
    ("¿la tienda de boavista cierra en agosto por vacaciones?", "férias do pessoal de 1 a 15 de agosto"),
    # Spanish, without accents, in other words
    ("si olvide el paraguas en la tienda me lo guardan?", "guardamo-la durante 30 dias"),
]
SMALL_TALK = ("conta-me uma anedota", "cuéntame un chiste", "tell me a joke about penguins", "olá, bom dia!",
              "muchas gracias, hasta luego", "qual é a capital de frança?", "¿quién ganó el partido de ayer?")


def test_meaning_finds_what_words_miss(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    files = ("politicas.pt.html", "horario.pt.md")
    by_meaning = retriever_for(make_settings(), redis_client, *files)
    for question, answer in FOUND_BY_MEANING:
        reference = by_meaning.preview(question)
        assert reference.embedded and answer in injected(by_meaning, question), question
        assert reference.picked[0].hit.margin is not None
    redis_client.flushdb()
    by_words = retriever_for(make_settings(EMBEDDING_MODEL="off"), redis_client, *files)
    for question, answer in FOUND_BY_MEANING:
        assert answer not in injected(by_words, question), question  # what the model adds


def test_small_talk_gets_nothing(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    retriever = retriever_for(make_settings(), redis_client, "politicas.pt.html", "horario.pt.md")
    for question in SMALL_TALK:
        reference = retriever.preview(question)
        assert reference.embedded and reference.picked == [], question
        assert reference.gate is not None and reference.gate.decision == "not_business", question
        assert reference.gate.reason.startswith("not about the business: margins")
        assert {c.reason for c in reference.considered} == {"not_business"}


def test_without_the_gate_model_each_passage_is_gated_by_itself(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    retriever = retriever_for(make_settings(EMBEDDING_GATE_MODEL="off"), redis_client, "politicas.pt.html",
                              "horario.pt.md")
    for question in ("conta-me uma anedota", "tell me a joke about penguins"):
        reference = retriever.preview(question)
        assert reference.embedded and reference.picked == [], question
        assert reference.gate is not None and reference.gate.decision == "by_hit"
        assert {c.reason for c in reference.considered} == {"below_min_score"}


def test_an_unanswered_business_question_gets_the_nearest_passages(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    # no page says whether the Boavista shop has parking: the reply model reads the nearest
    # passages (the shop's), sees that they do not answer, and says so (the prompt's rule)
    retriever = retriever_for(make_settings(), redis_client, "politicas.pt.html", "horario.pt.md")
    reference = retriever.preview("a loja da boavista tem lugar para estacionar o carro?")
    assert reference.gate is not None and reference.gate.decision == "business", reference.gate
    assert reference.picked and "Boavista" in injected(retriever, "a loja da boavista tem lugar para estacionar o carro?")


def test_a_hosted_ranking_model_is_still_gated_by_the_local_one(make_settings, redis_client, standin_server,
                                                                 embedding_server) -> None:  # type: ignore[no-untyped-def]
    # the ranking model is "hosted" (the stand-in's embeddings API); the gate model is the
    # local process's USE v3, its margin alone (no calibration per hosted model)
    settings = make_settings(EMBEDDING_MODEL="text-embedding-3-small", EMBEDDING_BASE_URL=standin_server.url,
                             EMBEDDING_GATE_BASE_URL=embedding_server.url)
    retriever = retriever_for(settings, redis_client, "politicas.pt.html", "horario.pt.md")
    assert retriever.gate is not None and retriever.gate.model == "universal-sentence-encoder-multilingual-3"
    for question in ("conta-me uma anedota", "tell me a joke about penguins", "olá, bom dia!"):
        reference = retriever.preview(question)
        assert reference.gate is not None and reference.gate.decision == "not_business", question
        assert reference.gate.reason.startswith("not about the business: gate margin") and not reference.picked
    reference = retriever.preview("a que horas abre a loja da boavista ao sábado?")
    assert reference.gate is not None and reference.gate.decision == "business"
    assert "Boavista" in injected(retriever, "a que horas abre a loja da boavista ao sábado?")


def test_the_gate_holds_for_a_knowledge_base_of_one_short_page(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    # the margin is taken over unrelated passages, not over the page's own few chunks
    retriever = retriever_for(make_settings(), redis_client, "horario.pt.md")
    assert "férias do pessoal" in injected(retriever, "¿la tienda de boavista cierra en agosto por vacaciones?")
    assert injected(retriever, "cuéntame un chiste") == ""
    assert injected(retriever, "muchas gracias, hasta luego") == ""


def test_a_spanish_question_on_the_message_path_gets_the_portuguese_page(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    services.library.add((EVAL / "horario.pt.md").read_bytes(), source="horario.pt.md", language="pt")
    say = chat_with()
    say("¿la tienda de boavista cierra en agosto por vacaciones?")
    blocks = reference_blocks(reply_requests(model)[-1])
    assert len(blocks) == 1 and "férias do pessoal de 1 a 15 de agosto" in blocks[0]
    say("olá, bom dia!")  # small talk on the same path: no reference at all
    assert reference_blocks(reply_requests(model)[-1]) == []


def test_with_the_model_down_words_alone_serve(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    services.library.add((EVAL / "horario.pt.md").read_bytes(), source="horario.pt.md", language="pt")
    say = chat_with(EMBEDDING_BASE_URL="http://127.0.0.1:9/v1")  # nothing listens there
    reply = say("a loja da boavista fecha para ferias em agosto?")
    assert "<Message>" in reply  # answered
    blocks = reference_blocks(reply_requests(model)[-1])
    assert len(blocks) == 1 and "férias do pessoal" in blocks[0]  # by its words


def test_the_tasks_restatement_in_the_documents_language_is_what_is_searched(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    import json

    services.library.add((EVAL / "horario.pt.md").read_bytes(), source="horario.pt.md", language="pt")
    say = chat_with(TASK_EXTRACTION="on")
    # the follow-up alone says nothing a page holds; the task model restates it in Portuguese
    task = {"task": "¿Y en agosto?", "search": "a loja da boavista fecha em agosto para férias?",
            "depends_on_chat_history": True, "depends_on_user_memory": False, "entities": []}
    model.script({"content": json.dumps(task), "match": "Known fact keys:"})
    say("¿y en agosto?")
    task_request = next(r for r in model.requests() if "Known fact keys:" in r["messages"][-1]["content"])
    assert task_request["messages"][-1]["content"].startswith("Documents' languages: pt\n")
    assert "search" in task_request["response_format"]["json_schema"]["schema"]["required"]
    blocks = reference_blocks(reply_requests(model)[-1])
    assert len(blocks) == 1 and "férias do pessoal de 1 a 15 de agosto" in blocks[0]
    # without a restatement ("" : it asks nothing of the business) the resolved task is searched
    task = {**task, "task": "Conta-me uma anedota.", "search": ""}
    model.script({"content": json.dumps(task), "match": "Known fact keys:"})
    say("cuéntame algo gracioso")
    assert reference_blocks(reply_requests(model)[-1]) == []


def test_the_restatement_is_what_both_models_embed(chat_with, model, services, standin_server,
                                                    embedding_server) -> None:  # type: ignore[no-untyped-def]
    # the ranking model through the stand-in's embeddings API records what it was asked for
    import json

    say = chat_with(TASK_EXTRACTION="on", EMBEDDING_MODEL="text-embedding-3-small",
                    EMBEDDING_BASE_URL=standin_server.url, EMBEDDING_GATE_BASE_URL=embedding_server.url)
    restated = "atendem crianças na loja da boavista?"
    task = {"task": "¿Atienden niños?", "search": restated, "depends_on_chat_history": False,
            "depends_on_user_memory": False, "entities": []}
    model.script({"content": json.dumps(task), "match": "Known fact keys:"})
    say("¿atienden niños?")

    def asked() -> list[str]:  # the turn may end before its unread embedding call lands
        return [text for name, text in model.embedded() if name == "text-embedding-3-small"]

    deadline = time.monotonic() + 30
    while not asked() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert asked() == [restated]


def test_a_page_in_three_languages_is_given_once_in_the_users(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    embedder, gate = make_embedder(make_settings()), make_gate_embedder(make_settings())
    store = KnowledgeStore(redis_client)
    library = Library(store, _counter(), make_settings(), embedder, gate)
    for name, language in (("hours.md", "en"), ("horario.pt.md", "pt"), ("horario.es.md", "es")):
        library.add((EVAL / name).read_bytes(), source=name, language=language)
    retriever = Retriever(store, _counter(), make_settings(), embedder, gate)
    for question, language, words in (("a loja da boavista abre ao sabado?", "pt", "Sábado: 08:00"),
                                       ("la tienda de boavista abre los sabados?", "es", "Sábados: 08:00"),
                                       ("does boavista open on saturdays?", "en", "Saturday: 08:00")):
        reference = retriever.search(question, retriever.index(), deadline_s=5.0, language=language)
        first = reference.picked[0].hit.chunk
        assert first.language == language and words in first.text, (question, first.id)
        boavista = [p for p in reference.picked if "Boavista" in p.hit.chunk.text.split("\n", 1)[0]]
        assert len(boavista) == 1, [p.hit.chunk.id for p in reference.picked]  # its translations are not given
        assert any(c.reason == "translation" and c.hit.translation_of == first.id for c in reference.considered)
