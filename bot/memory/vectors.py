"""Facts by meaning: each fact's embedding in 1 bit per dimension (docs/semantic.md).

A fact is embedded when it is written (by the extraction job, an operator's edit, the
console), as "key words: value", and kept as the signs of its vector minus the model's
center: 384 bits, 64 characters of base64, so a user's 50 facts add about 3.3 KB and the
vectors hash keeps Redis's compact encoding. The center is the mean of bot/llm/anchors.py's
passages, computed once per model by the first writer and stored (bot/storage/centers.py):
without it most bits would be alike, as every e5 vector leans the same way.

A message's vector (float) is scored against those signs (the asymmetric estimate of the
cosine of the centered vectors), plus GUIDE_WEIGHT times its closeness to what the fact's
category is about (CATEGORY_GUIDES, in the three languages: "sugere-me um jantar" is close
to what we eat, so the diet facts come closer): no model call, no Redis round trip on the
message path (the claim reads the vectors with the facts). Vectors of another model are
never compared.
"""

from __future__ import annotations

import base64
import threading
from typing import Iterable

import numpy as np
import structlog

from bot.llm.anchors import anchor_vectors, fixed_vectors
from bot.llm.embeddings import Embedder
from bot.storage.centers import CenterStore
from bot.storage.facts import MODEL_FIELD
from bot.storage.records import Fact

log = structlog.get_logger(__name__)

#: All a batch of facts' embeddings may take (a job or an operator's request, never a message).
ENCODE_DEADLINE_S = 30.0
#: What each category of fact is about (bot/storage/records.py's categories), in English,
#: Portuguese and Spanish: the cue lists of bot/memory/selection.py, read by meaning.
CATEGORY_GUIDES = {
    "identity": "who I am: my name, my age, my language; quem sou, nome, idade; quién soy, nombre, edad",
    "location": "where I live and go: my city, neighbourhood, address, travel and places; onde moro, cidade, "
                "bairro, viagem; dónde vivo, ciudad, barrio, viaje",
    "preference": "what I like and prefer: favourite things, hobbies, gifts, music, shopping; gostos, "
                  "preferências, passatempos; gustos, preferencias, aficiones",
    "diet": "what I eat: food, meals, dinner, lunch, recipes, cooking, restaurants; comida, jantar, almoço, "
            "receitas, cozinhar; comida, cena, almuerzo, recetas, cocinar",
    "health": "my health: allergies, illness, medication, doctor, exercise, pain; saúde, alergias, médico, "
              "dores; salud, alergias, médico, dolor",
    "work": "my work: job, employer, office, shifts, colleagues, career; trabalho, emprego, escritório, turnos; "
            "trabajo, empleo, oficina, turnos",
    "family": "my family: partner, children, parents, pets, birthdays; família, filhos, pais, animais; "
              "familia, hijos, padres, mascotas",
    "contact": "how to reach me: phone, email, best time to call; contacto, telefone, email; contacto, "
               "teléfono, correo",
    "schedule": "my schedule: times, days, appointments, plans, weekends; horários, marcações, planos; "
                "horarios, citas, planes",
}
#: How much a message's closeness to a fact's category adds to the fact's own similarity.
#: Tuned on the tuning half of `whatsapp-bot eval memory`: labelled facts in the block
#: 46.2 % with the fact alone (0), 50.0 % with 0.5, 0.75 or 1.0; 0.5 served the most
#: messages whole.
GUIDE_WEIGHT = 0.5


def fact_text(fact: Fact) -> str:
    """Return what is embedded for a fact: its key's words, then its value."""
    return f"{fact.key.replace('_', ' ')}: {fact.value}"


def pack_signs(vector: np.ndarray, center: np.ndarray) -> str:
    """Return the signs of vector - center, 1 bit each, as base64."""
    return base64.b64encode(np.packbits((vector - center) > 0).tobytes()).decode("ascii")


def unpack_signs(packed: str, dims: int) -> np.ndarray | None:
    """Return stored signs as +1/-1, or None when they do not fit the model's width."""
    try:
        raw = np.frombuffer(base64.b64decode(packed, validate=True), dtype=np.uint8)
    except ValueError:
        return None
    bits = np.unpackbits(raw)
    if bits.shape[0] < dims or bits.shape[0] - dims >= 8:
        return None
    return bits[:dims].astype(np.float32) * 2 - 1


class Space:
    """The middle of a model's space, and what each category of fact is about, relative to it."""

    def __init__(self, rows: np.ndarray) -> None:
        self.center = rows[0]
        guides = rows[1:] - self.center
        norms = np.linalg.norm(guides, axis=1, keepdims=True)
        self.guides = dict(zip(CATEGORY_GUIDES, guides / np.where(norms == 0, 1, norms))) \
            if len(guides) == len(CATEGORY_GUIDES) else {}


class FactVectors:
    """Embed facts as they are written, and score them against a message's vector."""

    def __init__(self, embedder: Embedder, centers: CenterStore) -> None:
        self.embedder = embedder
        self.centers = centers
        self._space: tuple[str, Space] | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """Return the model the vectors come from."""
        return self.embedder.model

    def space(self, compute: bool = False) -> Space | None:
        """Return the model's space: this process's copy, else the stored one, else (when
        compute, off the message path) the anchors' mean and the category guides, stored for
        every process."""
        held = self._space
        if held is not None and held[0] == self.model:
            return held[1]
        with self._lock:
            stored = self.centers.get(self.model)
            rows_stored = 1 + len(CATEGORY_GUIDES)
            if stored is not None and (len(stored) % (4 * rows_stored) or not stored):
                stored = None  # not what this version stores: computed again (the same center)
            if stored is None and compute:
                vectors = anchor_vectors(self.embedder, ENCODE_DEADLINE_S)
                mean = np.mean([np.frombuffer(v, dtype=np.float32) for v in vectors], axis=0).astype(np.float32)
                guides = fixed_vectors(self.embedder, tuple(CATEGORY_GUIDES.values()), ENCODE_DEADLINE_S)
                rows = np.vstack([mean, *[np.frombuffer(g, dtype=np.float32) for g in guides]]).astype(np.float32)
                stored = self.centers.put(self.model, rows.tobytes())
                log.info("memory.center_stored", model=self.model)
            if stored is None:
                return None
            space = Space(np.frombuffer(stored, dtype=np.float32).reshape(rows_stored, -1))
            self._space = (self.model, space)
            return space

    def center(self, compute: bool = False) -> np.ndarray | None:
        """Return the model's center (see space)."""
        space = self.space(compute)
        return None if space is None else space.center

    def encode(self, facts: Iterable[Fact]) -> dict[str, str]:
        """Return each fact's stored vector, by key; raise LLMUnavailable (or StoreUnavailable)."""
        facts = list(facts)
        if not facts:
            return {}
        center = self.center(compute=True)
        assert center is not None
        vectors = self.embedder.embed([fact_text(f) for f in facts], deadline_s=ENCODE_DEADLINE_S,
                                      purpose="memory_index")
        return {f.key: pack_signs(np.frombuffer(v, dtype=np.float32), center) for f, v in zip(facts, vectors)}

    def similarities(
        self, query: bytes, stored: dict[str, str], categories: dict[str, str] | None = None
    ) -> dict[str, float]:
        """Return, by fact key, how close each stored fact is to the message: about the
        cosine of the centered vectors, plus GUIDE_WEIGHT times the message's closeness to
        the fact's category (`categories`, by key); {} when they are another model's or the
        center is unknown."""
        if not stored or stored.get(MODEL_FIELD) != self.model:
            return {}
        space = self.space()
        if space is None:
            return {}
        center = space.center
        q = np.frombuffer(query, dtype=np.float32) - center
        norm = float(np.linalg.norm(q))
        if norm == 0 or q.shape[0] != center.shape[0]:
            return {}
        q = q / norm
        scale = 1 / np.sqrt(q.shape[0])
        near = {category: float(guide @ q) for category, guide in space.guides.items()}
        out = {}
        for key, packed in stored.items():
            if key == MODEL_FIELD:
                continue
            signs = unpack_signs(packed, q.shape[0])
            if signs is not None:
                out[key] = float(signs @ q) * scale + GUIDE_WEIGHT * near.get((categories or {}).get(key, ""), 0.0)
        return out
