"""Passages about nothing in particular, in the three languages: where the embedding space
has its middle (docs/semantic.md).

multilingual-e5-small scores any two texts 0.75-0.9: every vector leans the same way, and
how far depends on the text. Two uses:
- the knowledge base's dense gate: a question's margin is its cosine with a chunk over its
  mean cosine with these passages, so a chunk stands out only when it says something the
  question asks, however few chunks there are (a mean over three chunks meant nothing);
  they are embedded with the documents and stored beside the chunk vectors;
- facts kept in 1 bit per dimension: their mean is taken off before the signs are kept
  (the common lean would otherwise set most bits alike), bot/memory/vectors.py.
"""

from __future__ import annotations

import threading

from bot.llm.embeddings import Embedder

ANCHORS = (
    "The weather forecast says rain in the north and sunny spells in the south tomorrow.",
    "Football: the home side won two to one after a late goal in the second half.",
    "To change a flat tyre, loosen the wheel nuts before lifting the car with the jack.",
    "The museum's new exhibition shows paintings from the 17th century.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "Our software update fixes a bug that drained the phone's battery overnight.",
    "The train to the airport leaves every twenty minutes from platform four.",
    "A joke: why did the scarecrow win an award? Because he was outstanding in his field.",
    "Amanhã vai chover no litoral e as temperaturas vão descer.",
    "O governo anunciou novas regras para o imposto sobre veículos.",
    "Para plantar tomates, escolha um local com muito sol e regue de manhã.",
    "O concerto da banda foi adiado para o próximo mês por causa da chuva.",
    "A capital da Austrália é Camberra, e não Sydney.",
    "Escreve-me um poema sobre o mar e as gaivotas.",
    "La selección ganó el partido en los penaltis tras un empate sin goles.",
    "El banco central subió los tipos de interés medio punto.",
    "Para aprender a programar, empieza con ejercicios pequeños cada día.",
    "El vuelo a Madrid sale con dos horas de retraso por la niebla.",
    "Cuéntame un chiste corto para animar la reunión.",
    "¿Cuál es el sentido de la vida? Los filósofos llevan siglos discutiéndolo.",
    "Our company is hiring engineers; send your CV through the careers page.",
    "The hotel has a swimming pool, a gym and free parking for guests.",
    "A loja de informática repara portáteis e telemóveis em 48 horas.",
    "El gimnasio abre a las seis de la mañana y ofrece clases de yoga.",
)


_cache: dict[tuple[str, tuple[str, ...]], list[bytes]] = {}
_lock = threading.Lock()


def anchor_vectors(embedder: Embedder, deadline_s: float = 30.0) -> list[bytes]:
    """Return the passages' vectors under the embedder's model, embedded once per process
    and model (they never change); raise LLMUnavailable."""
    return fixed_vectors(embedder, ANCHORS, deadline_s)


def fixed_vectors(embedder: Embedder, texts: tuple[str, ...], deadline_s: float = 30.0) -> list[bytes]:
    """Return the vectors of fixed passages (these, or another module's constants), embedded
    once per process and model; raise LLMUnavailable."""
    with _lock:
        held = _cache.get((embedder.model, texts))
        if held is None:
            held = embedder.embed(list(texts), deadline_s=deadline_s, purpose="anchors")
            _cache[(embedder.model, texts)] = held
        return held
