"""Settings of the knowledge base (docs/knowledge.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

#: Snowball stemmers (PyStemmer) by the codes an operator writes; bm25s ships stopwords for
#: each of these. A language outside the table is indexed without stemming or stopwords.
LANGUAGES = {
    "en": "english", "pt": "portuguese", "es": "spanish", "fr": "french", "de": "german",
    "it": "italian", "nl": "dutch", "da": "danish", "sv": "swedish", "no": "norwegian",
    "ru": "russian", "tr": "turkish",
}
#: Reciprocal rank fusion's constant (Cormack et al. 2009; Chatwoot Captain uses it too).
RRF_K = 60
#: The most chunks injected into one prompt (Voiceflow's default is 3).
KNOWLEDGE_TOP_K = 3

#: The gate with the message's embedding (docs/semantic.md), tuned on the tuning half of
#: `eval knowledge` with multilingual-e5-small (the best recall@3 with at most 7.5 % false
#: injections): a hit passes by its words when they cover this much of the question (0.40
#: let one unrelated question in ten through once the dense ranking reorders the hits)...
HYBRID_MIN_SCORE = 0.50
#: ...or when both rankers agree: its margin reaches AGREE_MARGIN and its words AGREE_SCORE.
AGREE_MARGIN, AGREE_SCORE = 0.06, 0.30

#: With the gate model (EMBEDDING_GATE_MODEL, docs/semantic.md), tuned on the tuning half of
#: `eval knowledge` (the best recall@3 injected with about 5 % of off-topic messages given a
#: reference): three rankings fused by weighted reciprocal rank, the gate model's counting
#: most, BM25's least (it still breaks ties between near passages)...
GATED_RRF_K = 10
GATED_WEIGHTS = {"bm25": 0.25, "vector": 1.0, "gate": 1.5}
#: ...and a message is about the business when its best passage stands out of the anchors by
#: this much, the two models' margins summed (e5 ranking; AUC .97 against off-topic messages
#: on both halves)...
ABOUT_MIN_PAIR = 0.22
#: ...or, with a hosted ranking model, the gate model's margin alone (not calibrated per
#: hosted model: the same value for every one)...
ABOUT_MIN_GATE_ONLY = 0.17
#: ...or when its words cover this much of the question (BM25's own evidence).
ABOUT_MIN_WORDS = HYBRID_MIN_SCORE

DEFAULT_UNKNOWN_REPLY = "I'm sorry, I don't have that information. Could you ask me something else?"


class KnowledgeSettings(BaseModel):
    """KNOWLEDGE_* settings; each is documented in .env.example and README."""

    # The knowledge base's language, for stemming and stopwords (en, pt, es, fr, de...), or
    # several ("en,pt"); a document's own --language wins. Unset: no stemming (words must
    # match as written).
    KNOWLEDGE_LANGUAGE: str | None = None
    # The reference block's share of MAX_PROMPT_TOKENS: the best chunks in order, the last
    # one cut at a sentence. The summary and the oldest pairs give way to it, and it gives
    # way to the user's own message.
    KNOWLEDGE_MAX_TOKENS: int = Field(default=350, ge=50, le=2000)
    # How much of the question a chunk must cover to be injected: its BM25 score over the
    # score of a chunk holding each of the question's words once (0..1, past 1 for chunks
    # that repeat them). Tuned on `whatsapp-bot eval knowledge`.
    KNOWLEDGE_MIN_SCORE: float = Field(default=0.40, ge=0.0, le=5.0)
    # What the model says when the documents do not cover a question about the business;
    # point to a person here ("…write HUMAN to talk to our team").
    KNOWLEDGE_UNKNOWN_REPLY: str = Field(default=DEFAULT_UNKNOWN_REPLY, min_length=1, max_length=300)
    # Caps, checked before anything is written: a file's size, one document's chunks, and
    # the whole knowledge base (chunks, and bytes of text and vectors in Redis).
    KNOWLEDGE_MAX_DOC_BYTES: int = Field(default=5 * 1024 * 1024, ge=1024)
    KNOWLEDGE_MAX_DOC_CHUNKS: int = Field(default=2_000, ge=1)
    KNOWLEDGE_MAX_CHUNKS: int = Field(default=20_000, ge=1)
    KNOWLEDGE_MAX_BYTES: int = Field(default=64 * 1024 * 1024, ge=1024)
    # The dense half of the gate for "nothing relevant" (docs/semantic.md): a chunk found by
    # meaning is injected when its cosine with the question stands this far above the
    # question's mean cosine with passages about nothing the business does (the anchors). e5 scores any
    # two texts 0.75-0.9, so a raw threshold cannot tell a joke from a question; the margin can.
    # Tuned on the tuning half of `whatsapp-bot eval knowledge`.
    KNOWLEDGE_MIN_MARGIN: float = Field(default=0.09, ge=0.0, le=1.0)
    # The business's website as a source (`kb add https://…`, docs/knowledge.md): the most
    # pages one site may bring, how many links deep a crawl from its root goes, and the most
    # bytes one page may take (a bigger one is stopped as it arrives).
    KB_CRAWL_MAX_PAGES: int = Field(default=200, ge=1, le=5000)
    KB_CRAWL_MAX_DEPTH: int = Field(default=3, ge=0, le=10)
    KB_CRAWL_MAX_BYTES: int = Field(default=2 * 1024 * 1024, ge=1024, le=50 * 1024 * 1024)
    # How often every site is synced on the RQ scheduler (seconds; 0: only `kb sync` and the
    # console's "sync now"). An unchanged page costs a conditional GET and nothing else.
    KB_SYNC_INTERVAL: int = Field(default=86_400, ge=0)
    # Fetch sites on private, loopback or link-local addresses (a site on the business's own
    # network; `make run`'s stand-in site). Off: only public addresses, checked at every hop.
    KB_ALLOW_PRIVATE_URLS: bool = False

    @field_validator("KNOWLEDGE_LANGUAGE", mode="before")
    @classmethod
    def _empty_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("KNOWLEDGE_LANGUAGE")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        if value is None:
            return None
        codes = [code.strip().lower() for code in value.split(",") if code.strip()]
        if not codes or any(code not in LANGUAGES for code in codes):
            raise ValueError(f"KNOWLEDGE_LANGUAGE must be one of {', '.join(sorted(LANGUAGES))}, or several "
                             "joined by commas")
        return ",".join(codes)
