"""Speech to text through the openai SDK's audio.transcriptions, errors turned into ours.

OpenAI's models take the Ogg Opus of a WhatsApp voice note as it came, so nothing is
converted (no ffmpeg). Any OpenAI-compatible server works (TRANSCRIPTION_BASE_URL: a
self-hosted speaches or faster-whisper server; our stand-in under `make run`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from bot.exceptions import TranscriptionUnavailable
from bot.llm.deadline import DeadlineExceeded, run_with_deadline
from bot.llm.sdk import lazy_client

if TYPE_CHECKING:
    import openai
from bot.observability.metrics import MODEL_TOKENS, TRANSCRIPTION_SECONDS

log = structlog.get_logger(__name__)

#: A transcription shorter than this could not finish: it is not started.
MIN_ATTEMPT_S = 0.5


@dataclass(frozen=True)
class Transcript:
    """What was heard, and what it cost."""

    text: str
    model: str
    audio_seconds: int  # billed seconds: the API's usage, else the file's length, rounded up
    prompt_tokens: int  # audio and text input tokens, where the API reports them
    completion_tokens: int
    duration_s: float  # how long the call took


def make_transcription_client(base_url: str | None, api_key: str, timeout_s: float) -> openai.OpenAI:
    """Build the SDK client for transcriptions (at its first use: bot/llm/sdk.py): no SDK
    retries (the webhook's deadline rules), and a transport that ends a body trickling past
    the timeout."""
    return lazy_client(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)


def _usage(response: Any) -> tuple[int | None, int, int]:
    """Return (seconds, input tokens, output tokens) from a response's usage, if any:
    gpt-4o-*-transcribe report tokens, whisper-1 and self-hosted servers report seconds."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return None, 0, 0
    if getattr(usage, "type", "") == "duration" or hasattr(usage, "seconds"):
        seconds = getattr(usage, "seconds", None)
        return (math.ceil(seconds) if isinstance(seconds, (int, float)) else None), 0, 0
    return None, int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)


class Transcriber:
    """Transcribe voice notes with one model; every failure becomes TranscriptionUnavailable."""

    def __init__(self, client: openai.OpenAI, model: str, *, timeout_s: float) -> None:
        self.client = client
        self.model = model
        self.timeout_s = timeout_s

    def transcribe(
        self, data: bytes, *, filename: str, content_type: str, audio_seconds: float,
        language: str | None = None, deadline_s: float | None = None,
    ) -> Transcript:
        """Return what the voice note says; one attempt within min(timeout, deadline_s).

        No retry: a second attempt at a multi-second upload would not fit Twilio's 15 s,
        and the user is asked to send it again instead.
        """
        budget = self.timeout_s if deadline_s is None else min(self.timeout_s, deadline_s)
        if budget < MIN_ATTEMPT_S:
            raise TranscriptionUnavailable("no_time_left")
        request: dict[str, Any] = {
            "model": self.model,
            "file": (filename, data, content_type.split(";")[0].strip() or "audio/ogg"),
            "response_format": "json",
        }
        if language:
            request["language"] = language
        client = self.client.with_options(timeout=budget)
        import openai  # loaded with the client, just now (bot/llm/sdk.py)

        started = time.perf_counter()
        try:
            response = run_with_deadline(lambda: client.audio.transcriptions.create(**request), budget)
        except DeadlineExceeded:
            self._failed("timeout", started)
            raise TranscriptionUnavailable("timeout") from None
        except openai.APITimeoutError as err:
            self._failed("timeout", started)
            raise TranscriptionUnavailable("timeout") from err
        except openai.APIStatusError as err:
            self._failed("http_status", started, status=err.status_code)
            raise TranscriptionUnavailable("http_status", str(err.status_code)) from err
        except openai.OpenAIError as err:
            self._failed("connection", started, error=type(err).__name__)
            raise TranscriptionUnavailable("connection", type(err).__name__) from err
        duration = time.perf_counter() - started
        TRANSCRIPTION_SECONDS.observe(duration)
        text = " ".join((getattr(response, "text", None) or "").split())
        seconds, tokens_in, tokens_out = _usage(response)
        transcript = Transcript(
            text=text,
            model=self.model,
            audio_seconds=seconds if seconds is not None else math.ceil(audio_seconds),
            prompt_tokens=tokens_in,
            completion_tokens=tokens_out,
            duration_s=duration,
        )
        if tokens_in or tokens_out:
            MODEL_TOKENS.labels(purpose="transcription", model=self.model, kind="prompt").inc(tokens_in)
            MODEL_TOKENS.labels(purpose="transcription", model=self.model, kind="completion").inc(tokens_out)
        log.info("transcription.completed", model=self.model, duration_ms=round(duration * 1000, 1),
                 audio_s=transcript.audio_seconds, chars=len(text), language=language or "auto")
        if not text:
            log.warning("transcription.failed", reason="empty")
            raise TranscriptionUnavailable("empty")
        return transcript

    def _failed(self, reason: str, started: float, **fields: Any) -> None:
        log.warning("transcription.failed", reason=reason, model=self.model,
                    duration_ms=round((time.perf_counter() - started) * 1000, 1), **fields)
