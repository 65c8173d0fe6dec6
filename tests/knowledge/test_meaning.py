"""The knowledge base searched by meaning, with the real local model (multilingual-e5-small,
served as the Procfile's `embed` process serves it): a question in other words, or in
another language than the page, reaches the chunk that answers it; a joke gets nothing; and
with the model off or down, words alone serve, as before (docs/semantic.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.knowledge.library import Library
from bot.knowledge.retrieval import Retriever
from bot.llm.embeddings import make_embedder
from bot.storage.knowledge import KnowledgeStore
from tests.knowledge.test_message_path import reference_blocks, reply_requests

pytestmark = [pytest.mark.integration, pytest.mark.embeddings]

EVAL = Path(__file__).resolve().parents[2] / "bot" / "dev" / "eval_data" / "knowledge"


def retriever_for(settings, redis_client, *files: str) -> Retriever:  # type: ignore[no-untyped-def]
    """The production library and retriever over some of the eval's Portuguese pages."""
    embedder = make_embedder(settings)
    store = KnowledgeStore(redis_client)
    library = Library(store, _counter(), settings, embedder)
    for name in files:
        library.add((EVAL / name).read_bytes(), source=name, language="pt")
    return Retriever(store, _counter(), settings, embedder)


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
]


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


def test_an_unrelated_question_gets_nothing(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    retriever = retriever_for(make_settings(), redis_client, "politicas.pt.html", "horario.pt.md")
    for question in ("conta-me uma anedota", "cuéntame un chiste", "tell me a joke about penguins",
                     "qual é a capital de frança?", "¿quién ganó el partido de ayer?"):
        reference = retriever.preview(question)
        assert reference.embedded and reference.picked == [], question
        assert {c.reason for c in reference.considered} == {"below_min_score"}


def test_the_gate_holds_for_a_knowledge_base_of_one_short_page(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    # the margin is taken over unrelated passages, not over the page's own few chunks
    retriever = retriever_for(make_settings(), redis_client, "horario.pt.md")
    assert "férias do pessoal" in injected(retriever, "¿la tienda de boavista cierra en agosto por vacaciones?")
    assert injected(retriever, "cuéntame un chiste") == ""


def test_a_spanish_question_on_the_message_path_gets_the_portuguese_page(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    services.library.add((EVAL / "horario.pt.md").read_bytes(), source="horario.pt.md", language="pt")
    say = chat_with()
    say("¿la tienda de boavista cierra en agosto por vacaciones?")
    blocks = reference_blocks(reply_requests(model)[-1])
    assert len(blocks) == 1 and "férias do pessoal de 1 a 15 de agosto" in blocks[0]


def test_with_the_model_down_words_alone_serve(chat_with, model, services) -> None:  # type: ignore[no-untyped-def]
    services.library.add((EVAL / "horario.pt.md").read_bytes(), source="horario.pt.md", language="pt")
    say = chat_with(EMBEDDING_BASE_URL="http://127.0.0.1:9/v1")  # nothing listens there
    reply = say("a loja da boavista fecha para ferias em agosto?")
    assert "<Message>" in reply  # answered
    blocks = reference_blocks(reply_requests(model)[-1])
    assert len(blocks) == 1 and "férias do pessoal" in blocks[0]  # by its words
