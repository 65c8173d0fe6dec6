"""docs/semantic.md states the gate's and the `embed` process's numbers: each `NAME` (value)
it gives must be the code's."""

from __future__ import annotations

import re
from pathlib import Path

import bot.config.knowledge as knowledge
import bot.llm.local_embeddings as local
from bot.config import Settings
from bot.config.embeddings import GATE_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "semantic.md").read_text(encoding="utf-8")


def stated(name: str) -> str:
    """Return the value the page gives a name: "`NAME` (0.22" or "`NAME` 10" -> the number."""
    found = [v.rstrip(".,") for v in re.findall(rf"`{name}` \(?([0-9][0-9.,]*)", PAGE)]
    assert found, f"docs/semantic.md does not state {name}"
    assert len(set(found)) == 1, f"{name} is stated twice, differently: {found}"
    return found[0].replace(",", "")


def test_the_gates_numbers_are_the_codes() -> None:
    for name in ("ABOUT_MIN_PAIR", "ABOUT_MIN_GATE_ONLY", "ABOUT_MIN_WORDS", "GATED_RRF_K", "HYBRID_MIN_SCORE",
                 "KNOWLEDGE_TOP_K"):
        assert float(stated(name)) == float(getattr(knowledge, name)), name
    assert float(stated("KNOWLEDGE_MIN_MARGIN")) == Settings.model_fields["KNOWLEDGE_MIN_MARGIN"].default
    from bot.knowledge.dense import TRANSLATION_COS

    assert float(stated("TRANSLATION_COS")) == TRANSLATION_COS
    assert int(stated("KNOWLEDGE_MAX_TOKENS")) == Settings.model_fields["KNOWLEDGE_MAX_TOKENS"].default
    weights = knowledge.GATED_WEIGHTS
    assert (f"the gate model's\nranking {weights['gate']}, e5's {weights['vector']}, BM25's {weights['bm25']}"
            in PAGE)


def test_the_embed_process_is_described_as_it_is() -> None:
    assert int(stated("BACKGROUND_SLICE")) == local.BACKGROUND_SLICE
    assert f"LRU cache of {local.CACHE_SIZE:,} vectors" in PAGE and f"up to {local.CACHE_MAX_CHARS} characters" in PAGE
    assert f"`{LOCAL_EMBEDDING_MODEL}`" in PAGE and f"`{GATE_EMBEDDING_MODEL}`" in PAGE
