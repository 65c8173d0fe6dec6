"""Settings of voice notes, photos and shared locations (docs/media.md), mixed into Settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

#: Kept from WEBHOOK_DEADLINE_S for parsing, rendering and the network on either side.
HTTP_MARGIN_S = 0.5
#: A voice note's reply keeps at least this much of the webhook's time for the model after
#: the download and the transcription.
MIN_MODEL_AFTER_MEDIA_S = 3.0
#: Twilio's WhatsApp limit for a media file: 16 MB.
WHATSAPP_MEDIA_BYTES = 16 * 1024 * 1024
#: The longest side of a photo as the model sees it, by detail: 512 px is all low detail
#: looks at (OpenAI's vision guide); 1024 px keeps a high-detail photo's text readable.
IMAGE_SIDE_PX = {"low": 512, "high": 1024}


class MediaSettings(BaseModel):
    """Media settings; each is documented in .env.example and README."""

    # Voice notes are transcribed and answered as the words they hold (false: today's
    # polite "text only" reply, or MEDIA_PLACEHOLDERS).
    VOICE: bool = True
    # Photos go to the model as an image (false: the polite "text only" reply).
    VISION: bool = True
    # The model that sees photos; defaults to OPENAI_MODEL (it must accept images).
    VISION_MODEL: str | None = None
    # How closely the model looks: low (85 tokens, 512 px) or high (OpenAI's tiles, 1024 px
    # at most, shrunk further to fit MAX_PROMPT_TOKENS).
    IMAGE_DETAIL: Literal["low", "high"] = "low"
    # The largest photo fetched (WhatsApp compresses photos well under this).
    IMAGE_MAX_BYTES: int = Field(default=5 * 1024 * 1024, ge=10_000, le=WHATSAPP_MEDIA_BYTES)
    # The largest voice note (or other media) fetched: Twilio's WhatsApp limit.
    MEDIA_MAX_BYTES: int = Field(default=WHATSAPP_MEDIA_BYTES, ge=10_000, le=100 * 1024 * 1024)
    # All a media download may take, redirects and body included (connect and read timeouts
    # are cut to it); part of WEBHOOK_DEADLINE_S.
    MEDIA_FETCH_TIMEOUT_S: float = Field(default=4.0, ge=0.5, le=8.0)
    # A voice note longer than this (read from the file) is not transcribed: the user is
    # asked for a shorter one. Three minutes of speech is about 450 words.
    VOICE_MAX_SECONDS: int = Field(default=180, ge=1, le=1800)
    # Start the reply with a short quote of what was heard, so a mishearing shows.
    VOICE_ECHO: bool = True
    # The speech-to-text model (whisper-1 works too), on TRANSCRIPTION_BASE_URL if set (a
    # self-hosted speaches or faster-whisper server), else on OPENAI_BASE_URL.
    TRANSCRIPTION_MODEL: str = "gpt-4o-mini-transcribe"
    TRANSCRIPTION_BASE_URL: str | None = None
    # The key of TRANSCRIPTION_BASE_URL's server; defaults to OPENAI_API_KEY.
    TRANSCRIPTION_API_KEY: str | None = None
    # The transcription's language hint (ISO 639-1: en, pt, es); unset: the user's stored
    # language fact, if any, else the model's own guess.
    TRANSCRIPTION_LANGUAGE: str | None = None
    # All one transcription may take. A deferred voice note (docs/deferred.md) gets all of
    # it; on the webhook's clock (no deferred replies) it is cut to what the webhook has left.
    TRANSCRIPTION_TIMEOUT_S: float = Field(default=60.0, ge=1.0, le=600.0)
    # Media URLs are fetched with this API key pair instead of TWILIO_ACCOUNT_SID and
    # TWILIO_AUTH_TOKEN, when set (Twilio's recommended credentials for production).
    TWILIO_API_KEY_SID: str | None = None
    TWILIO_API_KEY_SECRET: str | None = None

    @field_validator(
        "VISION_MODEL", "TRANSCRIPTION_BASE_URL", "TRANSCRIPTION_API_KEY", "TRANSCRIPTION_LANGUAGE",
        "TWILIO_API_KEY_SID", "TWILIO_API_KEY_SECRET", mode="before",
    )
    @classmethod
    def _empty_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("TRANSCRIPTION_LANGUAGE")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        if value is not None and not (len(value) in (2, 3) and value.isalpha()):
            raise ValueError("must be an ISO 639-1 code such as en, pt or es")
        return value.lower() if value else None

    @property
    def vision_model(self) -> str:
        """Return the model that sees photos: VISION_MODEL, else OPENAI_MODEL."""
        return self.VISION_MODEL or self.OPENAI_MODEL  # type: ignore[attr-defined]

    @property
    def media_room_s(self) -> float:
        """Return the most a webhook can give a voice note's download and transcription
        together: what is left after the HTTP margin, the commit's and hand-off's Redis
        worst case, and MIN_MODEL_AFTER_MEDIA_S for the reply."""
        redis_worst = self.redis_worst_s  # type: ignore[attr-defined]
        return self.WEBHOOK_DEADLINE_S - HTTP_MARGIN_S - 2 * redis_worst - MIN_MODEL_AFTER_MEDIA_S  # type: ignore[attr-defined]

    @property
    def media_credentials(self) -> tuple[str, str] | None:
        """Return the basic-auth pair media is fetched with, or None when there is none."""
        if self.TWILIO_API_KEY_SID and self.TWILIO_API_KEY_SECRET:
            return self.TWILIO_API_KEY_SID, self.TWILIO_API_KEY_SECRET
        sid, token = self.TWILIO_ACCOUNT_SID, self.TWILIO_AUTH_TOKEN  # type: ignore[attr-defined]
        return (sid, token) if sid and token else None

    @property
    def image_side_px(self) -> int:
        """Return the longest side a photo is downscaled to, by IMAGE_DETAIL."""
        return IMAGE_SIDE_PX[self.IMAGE_DETAIL]
