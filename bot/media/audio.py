"""A voice note's duration, read from the file itself before anything is transcribed."""

from __future__ import annotations

import io

import mutagen
from mutagen import MutagenError

from bot.exceptions import BotError


class UnreadableAudio(BotError):
    """The bytes are not an audio file whose length can be read."""


def audio_duration(data: bytes) -> float:
    """Return the audio's length in seconds (Ogg Opus, Ogg Vorbis, MP3, M4A, AMR, WAV...);
    raise UnreadableAudio when mutagen cannot read it."""
    try:
        parsed = mutagen.File(io.BytesIO(data))
    except (MutagenError, ValueError, EOFError, OverflowError, IndexError, KeyError) as err:
        raise UnreadableAudio(type(err).__name__) from err
    length = getattr(getattr(parsed, "info", None), "length", None)
    if parsed is None or not isinstance(length, (int, float)) or length != length or length < 0:
        raise UnreadableAudio("not an audio file mutagen knows")
    return float(length)


#: The file name the transcription API is told, by subtype (it infers the format from it).
EXTENSIONS = {"ogg": "ogg", "opus": "ogg", "mpeg": "mp3", "mp3": "mp3", "mp4": "m4a", "m4a": "m4a",
              "x-m4a": "m4a", "aac": "m4a", "amr": "amr", "wav": "wav", "x-wav": "wav", "webm": "webm"}


def upload_name(subtype: str) -> str:
    """Return the file name a voice note is sent under ("voice.ogg"), by its MIME subtype."""
    return f"voice.{EXTENSIONS.get(subtype, 'ogg')}"
