"""What of a message is embedded, and how the client reaches the local model."""

from __future__ import annotations

import time

import pytest

from bot.config import load_settings
from bot.config.embeddings import LOCAL_EMBEDDING_MODEL
from bot.llm.embeddings import Breaker, clip_for_embedding, has_words, make_embedder, message_focus


def test_an_emoji_or_nothing_has_no_words() -> None:
    assert not has_words("👍🙏 ") and not has_words("") and not has_words("?!")
    assert has_words("ok 👍") and has_words("5")


def test_a_long_text_is_embedded_from_its_start_within_the_limit() -> None:
    transcript = "palavra " * 2000  # a 3-minute voice note's transcript, and more
    clipped = clip_for_embedding(transcript, 1500)
    assert len(clipped) <= 1500 and transcript.startswith(clipped) and not clipped.endswith(" ")
    assert clip_for_embedding("short  text\n", 1500) == "short text"


def test_a_long_message_is_embedded_by_what_it_asks() -> None:
    buried = ("olá bom dia! ontem estive aí na boavista com a minha filha e adorámos o bolo de banana. "
              "já agora, quantos cafés tenho de beber para ter um à borla? obrigada e bom trabalho")
    assert message_focus(buried) == "já agora, quantos cafés tenho de beber para ter um à borla?"
    assert message_focus("a que horas abrem? e ao sábado?") == "a que horas abrem? e ao sábado?"  # short: whole
    story = "x " * 80 + "and that is the whole story."
    assert message_focus(story) == story  # nothing asked: the whole text


@pytest.mark.embeddings  # the default model, whatever the pass
def test_the_local_model_is_reached_on_loopback_and_told_query_from_passage(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("EMBEDDING_BASE_URL", raising=False)  # the tests' own server is not the default
    settings = load_settings(env_files=False, need=(), EMBEDDING_PORT=8799)
    embedder = make_embedder(settings)
    assert embedder is not None and embedder.model == LOCAL_EMBEDDING_MODEL and embedder.asymmetric
    assert str(embedder.client.base_url).rstrip("/") == "http://127.0.0.1:8799/v1"
    hosted = make_embedder(load_settings(env_files=False, need=(), EMBEDDING_MODEL="text-embedding-3-small",
                                         OPENAI_BASE_URL="https://api.example.com/v1"))
    assert hosted is not None and not hosted.asymmetric  # a hosted API would refuse input_type
    assert str(hosted.client.base_url).rstrip("/") == "https://api.example.com/v1"
    assert make_embedder(load_settings(env_files=False, need=(), EMBEDDING_MODEL="off")) is None


def test_a_model_that_keeps_failing_is_not_asked_for_a_while() -> None:
    breaker = Breaker(failures=3, pause_s=0.2)
    for _ in range(3):
        assert breaker.allow()
        breaker.record(ok=False)
    assert not breaker.allow()  # paused: messages go by words at once
    time.sleep(0.25)
    assert breaker.allow() and not breaker.allow()  # one message tries again, the others wait for it
    breaker.record(ok=False)
    assert not breaker.allow()  # still failing: another pause
    time.sleep(0.25)
    assert breaker.allow()
    breaker.record(ok=True)
    assert breaker.allow() and breaker.allow()  # it answered: every message asks again
