"""The stand-in's voice notes and photos, through the real openai client over HTTP: a real
recording transcribed by tiny.en, scripted failures, and images answered from what they are."""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import mutagen
import openai
import pytest
from PIL import Image

from bot.dev.standin import StandinModel
from bot.llm.images import image_tokens
from tests.conftest import BUSY_SLACK_S

pytestmark = pytest.mark.integration

#: espeak-ng saying "Hello there. My name is Ana and I live in Porto." (tests/data/README.md).
VOICE = Path(__file__).resolve().parent.parent / "data" / "voice_ana.ogg"


@pytest.fixture
def client(model: StandinModel) -> Iterator[openai.OpenAI]:
    """The openai client on the stand-in, no retries (a scripted 500 must reach the test)."""
    with openai.OpenAI(base_url=model.url, api_key="x", max_retries=0) as api:
        yield api


def voice() -> bytes:
    """Return the fixture's bytes."""
    return VOICE.read_bytes()


def transcribe(client: openai.OpenAI, data: bytes | None = None, **extra: Any) -> Any:
    """Send a voice note as the bot does."""
    audio = voice() if data is None else data
    return client.audio.transcriptions.create(model="whisper-1", file=("voice.ogg", audio, "audio/ogg"), **extra)


def photo(width: int = 512, height: int = 384, kind: str = "JPEG") -> str:
    """Return a data URL of a plain image of this size and format."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(out, kind)
    return f"data:image/{kind.lower()};base64," + base64.b64encode(out.getvalue()).decode()


def ask(client: openai.OpenAI, caption: str, url: str | None = None, detail: str = "low") -> Any:
    """Send a user message with a caption and, if given, a photo, as the bot does."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": caption}]
    if url is not None:
        parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
    return client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": parts}])


def test_the_fixture_is_a_short_small_ogg_opus_voice_note() -> None:
    info = mutagen.File(VOICE).info
    assert type(mutagen.File(VOICE)).__name__ == "OggOpus"
    assert 3.0 < info.length < 5.0 and info.channels == 1
    assert VOICE.stat().st_size < 20_000


def test_a_real_voice_note_is_transcribed_and_recorded_without_its_audio(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    result = transcribe(client, language="pt")  # tiny.en is English-only: the hint is ignored
    words = re.findall(r"[a-z]+", result.text.lower())
    assert {"hello", "name", "live", "porto"} <= set(words), result.text
    assert re.search(r"\ban{1,2}a\b", result.text.lower()), result.text  # tiny.en writes "Anna"
    assert result.usage.type == "duration" and result.usage.seconds == 4  # 3.93 s, rounded up
    [seen] = model.transcriptions()
    assert seen == {"model": "whisper-1", "language": "pt", "prompt": None, "filename": "voice.ogg",
                    "bytes": len(voice()), "response_format": "json"}


def test_verbose_json_gives_duration_and_language_and_text_is_plain(client) -> None:  # type: ignore[no-untyped-def]
    verbose = transcribe(client, response_format="verbose_json")
    assert verbose.duration == pytest.approx(mutagen.File(VOICE).info.length, abs=0.05)
    assert verbose.language == "english" and "porto" in verbose.text.lower()
    plain = transcribe(client, response_format="text")
    assert isinstance(plain, str) and plain == verbose.text


def test_a_scripted_500_fails_once_then_the_model_answers(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", "status": 500})
    with pytest.raises(openai.InternalServerError):
        transcribe(client)
    assert "porto" in transcribe(client).text.lower()
    assert len(model.transcriptions()) == 2


def test_a_scripted_empty_transcript_keeps_the_duration(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", "content": ""})
    result = transcribe(client)
    assert result.text == "" and result.usage.seconds == 4


def test_a_scripted_delay_and_the_gate_hold_a_transcription(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", "content": "late", "delay_s": 1.0})
    with pytest.raises(openai.APITimeoutError):
        transcribe(client, timeout=0.3)
    model.gate.clear()
    try:
        with pytest.raises(openai.APITimeoutError):
            transcribe(client, timeout=0.3)
    finally:
        model.gate.set()


@pytest.mark.parametrize("data", [b"not audio at all " * 50, b"", voice()[:200]], ids=["garbage", "empty", "cut"])
def test_audio_that_does_not_decode_is_a_400(client, data: bytes) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(openai.BadRequestError) as caught:
        transcribe(client, data)
    assert caught.value.body["param"] == "file"  # type: ignore[index]


def test_a_chat_step_is_not_taken_by_a_voice_note_nor_a_transcription_step_by_a_chat(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", "content": "scripted words"}, {"content": "the scripted chat answer"})
    assert ask(client, "hi").choices[0].message.content == "the scripted chat answer"
    assert transcribe(client).text == "scripted words"
    model.script({"content": "chat again"})
    assert "porto" in transcribe(client).text.lower()
    assert ask(client, "hi").choices[0].message.content == "chat again"


def test_transcription_steps_over_http_and_the_record_over_http(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    base = model.url.removesuffix("/v1")
    steps = json.dumps({"steps": [{"kind": "transcription", "content": "over http", "match": "note"}]}).encode()
    urllib.request.urlopen(urllib.request.Request(f"{base}/_standin/script", data=steps), timeout=5).close()
    assert "porto" in transcribe(client).text.lower()  # voice.ogg: the step waits for its file
    named = client.audio.transcriptions.create(model="whisper-1", file=("note.ogg", voice(), "audio/ogg"))
    assert named.text == "over http"
    with urllib.request.urlopen(f"{base}/_standin/transcriptions", timeout=5) as r:
        recorded = json.load(r)["transcriptions"]
    assert [t["filename"] for t in recorded] == ["voice.ogg", "note.ogg"]


def test_a_photo_is_answered_from_its_size_and_format_and_its_tokens_are_counted(client) -> None:  # type: ignore[no-untyped-def]
    caption = "What is in this picture?"
    text_only = ask(client, caption).usage.prompt_tokens
    low = ask(client, caption, photo(), detail="low")
    reply = low.choices[0].message.content
    assert "I see a 512×384 JPEG image (detail low)." in reply
    assert f"You said: “{caption}”" in reply
    assert low.usage.prompt_tokens == text_only + image_tokens(512, 384, "low")
    high = ask(client, caption, photo(1600, 1200, "PNG"), detail="high")
    assert "I see a 1600×1200 PNG image (detail high)." in high.choices[0].message.content
    assert high.usage.prompt_tokens == text_only + image_tokens(1600, 1200, "high") != text_only + 85


def test_a_caption_is_the_text_scripts_match(client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "a scripted look at the dog", "match": "my dog"})
    assert ask(client, "this is my dog", photo()).choices[0].message.content == "a scripted look at the dog"
    assert model.reported()[-1]["last_user"] == "this is my dog"


@pytest.mark.parametrize("url", [
    "data:image/jpeg;base64," + base64.b64encode(b"not an image").decode(),
    "data:image/jpeg;base64,***",
    photo()[:200],  # cut short
    "https://example.com/cat.jpg",  # the stand-in has no network
    photo(kind="BMP"),  # not a format OpenAI takes
], ids=["not-an-image", "bad-base64", "truncated", "remote-url", "bmp"])
def test_an_image_that_cannot_be_decoded_is_a_400(client, url: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, "look", url)
    assert "Invalid image" in str(caught.value)


def long_wav(repeats: int) -> bytes:
    """Return the fixture's speech said `repeats` times over, as a 16 kHz WAV."""
    import wave

    import numpy as np

    from bot.dev.standin_audio import SAMPLE_RATE, decode

    samples = np.tile(decode(voice()), repeats)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def test_a_transcription_its_client_gave_up_on_stops(client: openai.OpenAI, model: StandinModel) -> None:
    """A client that times out (the bot's TRANSCRIPTION_TIMEOUT_S) stops the work: the next
    voice note is not slowed down by an abandoned one."""
    import time

    started = time.monotonic()
    assert "porto" in transcribe(client).text.lower()
    alone = time.monotonic() - started  # a short voice note on this machine, now
    long = long_wav(40)  # about 2.5 minutes of speech: many times the work of the short one
    with pytest.raises(openai.APITimeoutError):
        client.audio.transcriptions.create(model="whisper-1", file=("long.wav", long, "audio/wav"), timeout=0.5)
    deadline = time.monotonic() + 10
    while "long.wav" not in model.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert model.cancelled.count("long.wav") == 1  # another test's voice note may stop too: not counted
    started = time.monotonic()
    assert "porto" in transcribe(client).text.lower()
    assert time.monotonic() - started < 3 * alone + BUSY_SLACK_S  # not behind the long one's work
