"""The index, the pick and the library: languages kept apart, accents, the minimum score, the
budget with its cut at a sentence, embeddings fused by rank (through the real openai client
and the stand-in's /v1/embeddings) and a failed embedding falling back to BM25."""

from __future__ import annotations

import openai
import pytest

from bot.exceptions import LLMUnavailable
from bot.knowledge.index import KnowledgeIndex
from bot.knowledge.library import KnowledgeError, Library
from bot.knowledge.reference import MIN_CUT_TOKENS, Limits, build_reference, shrink
from bot.knowledge.retrieval import Retriever
from bot.llm.embeddings import Embedder
from bot.llm.tokens import TokenCounter
from bot.storage.knowledge import KnowledgeStore, StoredChunk

COUNTER = TokenCounter("gpt-4o-mini")


def chunk(chunk_id: str, text: str, language: str | None = "en") -> StoredChunk:
    return StoredChunk(chunk_id, chunk_id.split("#")[0], chunk_id, language, text, COUNTER.count(text))


CHUNKS = [
    chunk("hours#1", "Hours › Sunday\nOn Sundays we open at 09:00 and close at 14:00."),
    chunk("horario#1", "Horário › Domingo\nAos domingos abrimos às 9h e fechamos às 14h.", "pt"),
    chunk("faq#1", "FAQ › Delivery\nWe deliver to Porto, Gaia and Matosinhos for a fee of 2.50 euros."),
    chunk("faq#2", "FAQ › Loyalty\nEvery tenth coffee is free with the loyalty card; ask for a sello at the till."),
]


def test_each_language_is_searched_with_its_own_stemmer_and_accents_do_not_matter() -> None:
    index = KnowledgeIndex("1", CHUNKS)
    assert index.search("horario de domingo?")[0].chunk.id == "horario#1"  # no accent, a stopword
    assert index.search("what time do you open on sundays?")[0].chunk.id == "hours#1"  # sundays -> sunday
    assert [h.chunk.id for h in index.search("do u deliver to gaia")][:1] == ["faq#1"]
    assert index.search("tell me a joke") == []
    # without a language nothing is stemmed: the words must match as written
    plain = KnowledgeIndex("1", [chunk("hours#1", CHUNKS[0].text, None)])
    assert plain.search("closing") == [] and plain.search("close")[0].chunk.id == "hours#1"
    assert KnowledgeIndex("1", [chunk("hours#1", CHUNKS[0].text, None)], default_language="en").search("closing")


def test_a_question_about_something_the_documents_lack_scores_low() -> None:
    index = KnowledgeIndex("1", CHUNKS)
    covered = index.search("delivery fee to gaia")[0]
    uncovered = index.search("delivery of bicycles")[0]
    assert covered.score > 0.6 > uncovered.score and covered.coverage == pytest.approx(1.0)


def test_the_pick_keeps_the_budget_cuts_at_a_sentence_and_explains_itself() -> None:
    long = chunk("policy#1", "Policy › Refunds\n" + " ".join(
        f"Refund rule {i} applies to every cake order placed online." for i in range(1, 30)))
    hits = KnowledgeIndex("1", [long, *CHUNKS]).search("refund for a cake order")
    reference = build_reference("q", "1", hits, COUNTER, Limits(120, min_score=0.3, min_margin=0.1, top_k=3))
    assert reference.tokens <= 120 and reference.picked[0].cut
    assert reference.picked[0].text.endswith("online.") and reference.picked[0].tokens >= MIN_CUT_TOKENS
    assert reference.considered[0].reason == "cut_to_fit"
    assert shrink(reference, COUNTER, 10).picked == []  # no room: nothing rather than a stub
    none = build_reference("q", "1", hits, COUNTER, Limits(250, min_score=5.0, min_margin=0.1, top_k=3))
    assert none.block == "" and {c.reason for c in none.considered} == {"below_min_score"}


def test_embeddings_are_fused_by_rank_and_a_failure_leaves_bm25(redis_client, settings, standin_server) -> None:  # type: ignore[no-untyped-def]
    client = openai.OpenAI(api_key="x", base_url=standin_server.url, max_retries=0)
    embedder = Embedder(client, "standin-embedding")
    store = KnowledgeStore(redis_client)
    library = Library(store, COUNTER, settings, embedder)
    library.add(b"# FAQ\n\n## Delivery\nWe deliver to Porto, Gaia and Matosinhos for 2.50 euros.\n\n"
                b"## Loyalty\nEvery tenth coffee is free with the loyalty card.\n", source="faq.md", language="en")
    assert all(c.vector for c in store.snapshot(vectors=True).chunks)
    retriever = Retriever(store, COUNTER, settings, embedder)
    reference = retriever.preview("deliver to gaia")
    assert reference.embedded and reference.picked[0].hit.vector_rank == 1 and reference.picked[0].hit.bm25_rank == 1
    assert reference.picked[0].hit.similarity is not None
    # the question's embedding fails: BM25 alone serves
    broken = Embedder(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", max_retries=0), "m")
    fallback = Retriever(store, COUNTER, settings, broken).preview("deliver to gaia")
    assert not fallback.embedded and fallback.picked[0].hit.chunk.id == "faq#1"
    with pytest.raises(LLMUnavailable):
        broken.embed(["x"], deadline_s=1.0, purpose="test")
    # the model is down while a document is added: it is stored for words alone...
    added = Library(store, COUNTER, settings, broken).add(b"# New\n\nOur bikes are red.", source="new.md")
    assert added.doc.embedding_model == "" and set(store.documents()) == {"faq", "new"}
    assert Retriever(store, COUNTER, settings, embedder).preview("red bikes").picked[0].hit.chunk.id == "new#1"
    # ...and `kb reembed` gives it vectors once the model answers; the rest were current
    assert library.reembed() == {"reembedded": 1, "current": 1}
    assert all(c.vector and c.vector_model == "standin-embedding" for c in store.snapshot(vectors=True).chunks)
    assert library.reembed() == {"reembedded": 0, "current": 2}


def test_the_library_replaces_by_path_or_title_and_keeps_ids(redis_client, settings) -> None:  # type: ignore[no-untyped-def]
    library = Library(KnowledgeStore(redis_client), COUNTER, settings)
    first = library.add(b"# Opening hours\n\nWe open at 9.", source="docs/hours.md")
    assert (first.status, first.doc.id, first.doc.title) == ("added", "opening-hours", "Opening hours")
    assert library.add(b"# Opening hours\n\nWe open at 9.", source="docs/hours.md").status == "unchanged"
    relabelled = library.add(b"# Opening hours\n\nWe open at 9.", source="docs/hours.md", language="en")
    assert relabelled.status == "replaced" and relabelled.doc.language == "en"
    # without --language a re-add keeps the document's language
    assert library.add(b"# Opening hours\n\nWe open at 9.", source="docs/hours.md").status == "unchanged"
    by_title = library.add(b"# Opening hours\n\nWe open at 10.", source="upload/hours-2026.md")
    assert (by_title.status, by_title.doc.id) == ("replaced", "opening-hours")
    other = library.add(b"# Opening hours\n\nBranch two opens at 8.", source="b.md", title="Branch two hours")
    assert other.doc.id == "branch-two-hours" and len(library.documents()) == 2
    with pytest.raises(KnowledgeError, match="KNOWLEDGE_MAX_DOC_CHUNKS"):
        Library(library.store, COUNTER, settings.model_copy(update={"KNOWLEDGE_MAX_DOC_CHUNKS": 1})).add(
            b"# Big\n\n" + b"Many words about bread and cakes. " * 400, source="big.md")
    assert len(library.documents()) == 2


def test_both_models_vectors_are_stored_side_by_side_and_reembed_fills_the_gate_models(
    redis_client, settings, standin_server
) -> None:  # type: ignore[no-untyped-def]
    client = openai.OpenAI(api_key="x", base_url=standin_server.url, max_retries=0)
    ranker, gate = Embedder(client, "standin-embedding"), Embedder(client, "standin-gate")
    down = Embedder(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", max_retries=0), "standin-gate")
    store = KnowledgeStore(redis_client)
    faq = b"# FAQ\n\n## Delivery\nWe deliver to Porto and Gaia for 2.50 euros.\n"
    # the gate model is down while a document is added: the ranking model's vectors alone
    added = Library(store, COUNTER, settings, ranker, down).add(faq, source="faq.md", language="en")
    assert (added.doc.embedding_model, added.doc.gate_model) == ("standin-embedding", "")
    assert [set(c.vectors) for c in store.snapshot(vectors=True).chunks] == [{"standin-embedding"}]
    library = Library(store, COUNTER, settings, ranker, gate)
    index = Retriever(store, COUNTER, settings, ranker, gate).index()
    assert index.has_vectors and not index.has_gate  # hit by hit until `kb reembed`
    assert library.reembed() == {"reembedded": 1, "current": 0}
    snapshot = store.snapshot(vectors=True)
    assert [set(c.vectors) for c in snapshot.chunks] == [{"standin-embedding", "standin-gate"}]
    assert snapshot.chunks[0].vector_model == "standin-embedding"  # the ranking model's comes first
    assert {model for _, model in snapshot.anchors} == {"standin-embedding", "standin-gate"}
    assert store.anchors_model() == "standin-embedding+standin-gate"
    assert store.documents()["faq"].gate_model == "standin-gate"
    assert library.reembed() == {"reembedded": 0, "current": 1}
    # the same file again, with both models current, writes nothing
    assert library.add(faq, source="faq.md", language="en").status == "unchanged"
    index = Retriever(store, COUNTER, settings, ranker, gate).index()
    assert index.has_gate and index.gate_vectors is not None and index.gate_vectors.shape[0] == 1
    found = index.find("deliver to gaia", question_vector=ranker.query("deliver to gaia", deadline_s=5, purpose="t"),
                       gate_vector=gate.query("deliver to gaia", deadline_s=5, purpose="t"))
    assert found.hits[0].gate_rank == 1 and found.hits[0].gate_margin is not None
    assert found.gate.decision in ("business", "not_business") and found.gate.gate_margin is not None
