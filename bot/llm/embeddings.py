"""Embeddings through the openai SDK's /v1/embeddings, errors turned into ours.

One code path for every model (docs/semantic.md): the local multilingual-e5-small that the
Procfile's `embed` process serves on loopback, or a hosted one. e5 was trained with two
prefixes, "query: " for what is asked and "passage: " for what is searched; the local
server takes them as `input_type`, so only the local model is sent one (a hosted API would
refuse the unknown field). A text is embedded from its start within EMBEDDING_MAX_CHARS.

Chunks and facts are embedded off the message path (in batches, with the SDK's own retry);
a message once per turn with a short hard deadline and no retry. Vectors travel as float32
bytes.
"""

from __future__ import annotations

import re
import threading
import time
from array import array
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Literal, Sequence

import structlog

from bot.config.embeddings import LOCAL_EMBEDDING_MODEL
from bot.exceptions import LLMUnavailable
from bot.llm.deadline import DeadlineExceeded, run_with_deadline, submit
from bot.llm.sdk import lazy_client
from bot.observability.metrics import MESSAGE_EMBEDDINGS, MODEL_TOKENS

if TYPE_CHECKING:
    import openai

    from bot.config import Settings

log = structlog.get_logger(__name__)

#: Texts per request when a document is embedded (OpenAI takes up to 2,048 inputs).
BATCH = 128

Kind = Literal["query", "passage"]


def as_float32(values: Sequence[float]) -> bytes:
    """Return a vector as float32 bytes."""
    return array("f", values).tobytes()


def has_words(text: str) -> bool:
    """Return whether a text holds a letter or a digit (an emoji alone costs no embedding)."""
    return any(ch.isalnum() for ch in text)


#: A message at least this long is embedded by its questions only (see message_focus).
FOCUS_MIN_CHARS = 120
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")


def message_focus(text: str) -> str:
    """Return what of a message is embedded: a long one (a voice note's transcript, a
    paragraph of context) by its sentences that ask something, when it has any; the
    greetings and the story around a question dilute its vector (on `eval knowledge`'s
    questions buried in a voice note, recall@3 went from 0 to 25 %, docs/semantic.md)."""
    if len(text) < FOCUS_MIN_CHARS:
        return text
    asked = [part.strip() for part in _SENTENCE.split(text) if "?" in part or "¿" in part]
    return " ".join(asked) if asked else text


def clip_for_embedding(text: str, max_chars: int) -> str:
    """Return the text's start, within max_chars, cut at a space when there is one."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return cut[:space] if space > max_chars // 2 else cut


#: Messages whose embedding failed or came late in a row before the message path stops asking
#: for a while (a hung model would otherwise cost every message EMBEDDING_DEADLINE_S)...
BREAKER_FAILURES = 3
#: ...and for how long; then one message tries again.
BREAKER_PAUSE_S = 30.0


class Breaker:
    """Stop asking a model (or a tool: docs/tools.md) that keeps failing on the message path,
    and try again later: after `failures` in a row, one caller tries every `pause_s`."""

    def __init__(self, failures: int = BREAKER_FAILURES, pause_s: float = BREAKER_PAUSE_S, *,
                 event: str = "embeddings.paused",
                 detail: str = "messages are answered by words until the model answers again", **fields: str) -> None:
        self.failures = failures
        self.pause_s = pause_s
        self.event, self.detail, self.fields = event, detail, fields  # what the log says when it opens
        self._lock = threading.Lock()
        self._count = 0
        self._until = 0.0

    def allow(self) -> bool:
        """Return whether a message may ask the model now (after a pause, one at a time)."""
        with self._lock:
            now = time.monotonic()
            if self._count < self.failures or now >= self._until:
                if self._count >= self.failures:
                    self._until = now + self.pause_s  # this one tries; the others wait for it
                return True
            return False

    def record(self, ok: bool) -> None:
        """Count a message's embedding: a success closes the breaker, failures open it."""
        with self._lock:
            if ok:
                self._count = 0
                return
            self._count += 1
            if self._count == self.failures:
                self._until = time.monotonic() + self.pause_s
                log.warning(self.event, seconds=self.pause_s, failures=self._count, detail=self.detail, **self.fields)


class Embedder:
    """Embed texts with one model; every failure becomes LLMUnavailable."""

    def __init__(
        self, client: openai.OpenAI, model: str, *, asymmetric: bool = False, local: bool = False,
        max_chars: int = 1500,
    ) -> None:
        self.client = client
        self.model = model
        self.asymmetric = asymmetric  # send e5's query/passage as input_type
        self.local = local  # our `embed` process: passages say they may wait behind messages
        self.max_chars = max_chars
        self.breaker = Breaker()  # the message path's, per process

    def embed(
        self, texts: Sequence[str], *, deadline_s: float, purpose: str, kind: Kind = "passage"
    ) -> list[bytes]:
        """Return one float32 vector per text, all within deadline_s."""
        vectors: list[bytes] = []
        started = time.perf_counter()
        deadline = time.monotonic() + deadline_s
        extra: dict[str, str] = {"input_type": kind} if self.asymmetric else {}
        if self.local and kind == "passage":  # chunks, facts, anchors: after any message (docs/semantic.md)
            extra["priority"] = "background"
        import openai  # loaded with the client, at its first call (bot/llm/sdk.py)

        for start in range(0, len(texts), BATCH):
            batch = [clip_for_embedding(t, self.max_chars) or "-" for t in texts[start:start + BATCH]]
            budget = deadline - time.monotonic()
            if budget <= 0.05:
                raise LLMUnavailable("no time left for the embeddings")
            try:
                response = run_with_deadline(lambda: self.client.embeddings.create(
                    model=self.model, input=batch, extra_body=extra or None, timeout=budget), budget)
            except DeadlineExceeded:
                self._failed(purpose, "timeout", started)
                raise LLMUnavailable("embeddings: timeout") from None
            except openai.OpenAIError as err:
                self._failed(purpose, type(err).__name__, started)
                raise LLMUnavailable(f"embeddings: {type(err).__name__}: {err}") from err
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise LLMUnavailable(f"embeddings: {len(data)} vectors for {len(batch)} texts")
            vectors += [as_float32(item.embedding) for item in data]
            usage = getattr(response, "usage", None)
            if usage is not None:
                MODEL_TOKENS.labels(purpose=purpose, model=self.model, kind="prompt").inc(usage.prompt_tokens or 0)
        return vectors

    def query(self, text: str, *, deadline_s: float, purpose: str) -> bytes:
        """Return the vector of something asked: a message (by what it asks, message_focus),
        a question, a task; raise LLMUnavailable."""
        return self.embed([message_focus(text)], deadline_s=deadline_s, purpose=purpose, kind="query")[0]

    def _failed(self, purpose: str, error: str, started: float) -> None:
        log.warning("embeddings.failed", purpose=purpose, model=self.model, error=error,
                    duration_ms=round((time.perf_counter() - started) * 1000, 1))


def make_embedder(settings: Settings) -> Embedder | None:
    """Build the embedder the settings name (None with EMBEDDING_MODEL=off)."""
    if not settings.embeddings_on:
        return None
    client = lazy_client(api_key=settings.EMBEDDING_API_KEY or settings.openai_api_key,
                         base_url=settings.embedding_base_url, timeout=settings.EMBEDDING_DEADLINE_S, max_retries=1,
                         max_connections=200, max_keepalive=50, nodelay=True)
    # The local model's server takes e5's prefixes (wherever it is served, tests included).
    asymmetric = settings.EMBEDDING_MODEL == LOCAL_EMBEDDING_MODEL
    return Embedder(client, settings.EMBEDDING_MODEL, asymmetric=asymmetric, local=asymmetric,
                    max_chars=settings.EMBEDDING_MAX_CHARS)


def make_gate_embedder(settings: Settings) -> Embedder | None:
    """Build the gate model's embedder (None when it or embeddings are off): always our local
    `embed` process's USE v3, whatever model ranks (docs/semantic.md)."""
    if not settings.gate_on:
        return None
    client = lazy_client(api_key="local", base_url=settings.gate_base_url, timeout=settings.EMBEDDING_DEADLINE_S,
                         max_retries=1, max_connections=200, max_keepalive=50, nodelay=True)
    return Embedder(client, settings.EMBEDDING_GATE_MODEL, local=True, max_chars=settings.EMBEDDING_MAX_CHARS)


class MessageVector:
    """One message's embedding, asked for once and shared by every step that needs it.

    The call starts at once on the model pool (bot/llm/deadline.py), so the steps before the
    first reader (BM25 among them) run while the model works; each reader waits at most
    until the deadline. A failure or a late answer is logged and counted once, and every
    reader then falls back to words.
    """

    def __init__(self, embedder: Embedder, text: str, deadline_s: float, counted: bool = True) -> None:
        self.model = embedder.model
        self.counted = counted  # the ranking model's is bot_message_embeddings_total; the gate's is not
        self.breaker = embedder.breaker
        self.deadline = time.monotonic() + deadline_s
        self._started = time.perf_counter()
        self._future = submit(lambda: embedder.query(text, deadline_s=deadline_s, purpose="message"))
        self._settled = False
        self._vector: bytes | None = None

    def get(self) -> bytes | None:
        """Return the vector, or None when it failed or came too late (words alone serve)."""
        if self._settled:
            return self._vector
        try:
            self._vector = self._future.result(timeout=max(0.0, self.deadline - time.monotonic()))
            if self.counted:
                MESSAGE_EMBEDDINGS.labels(outcome="ok").inc()
            self.breaker.record(ok=True)
        except FutureTimeout:
            self.breaker.record(ok=False)
            self._future.cancel()
            if self.counted:
                MESSAGE_EMBEDDINGS.labels(outcome="timeout").inc()
            log.warning("embeddings.message_fallback", reason="timeout", model=self.model,
                        waited_ms=round((time.perf_counter() - self._started) * 1000, 1))
        except LLMUnavailable as err:
            self.breaker.record(ok=False)
            if self.counted:
                MESSAGE_EMBEDDINGS.labels(outcome="failed").inc()
            log.warning("embeddings.message_fallback", reason="failed", model=self.model, error=str(err)[:200])
        self._settled = True
        return self._vector
