"""The media step: a voice note becomes its transcript, a photo an image part for the reply
call, a shared location a line of text (docs/media.md). It runs after `rate-limit` (a flood of
voice notes costs no downloads) and before `entities`, so every later step handles the
result as it handles typed text. A redelivery stops at `claim`: nothing is fetched or
transcribed twice.

Where the attachment comes from is the channel's business: the step asks a MediaSource
for the bytes of an opaque reference. Every failure is a polite reply, logged and counted
(bot_media_total), with nothing stored.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from bot.config.media import MediaSettings
from bot.config.media import MIN_MODEL_AFTER_MEDIA_S
from bot.conversation import filtering
from bot.conversation.messages import PHOTO_MARK, SPOKEN_MARK, MediaItem
from bot.conversation.turn import Turn
from bot.conversation import language
from bot.conversation.catalog import Catalog
from bot.conversation.replies import media_placeholder, unsupported_media_reply
from bot.exceptions import MediaUnavailable, StoreUnavailable, TranscriptionUnavailable
from bot.llm.tokens import TokenCounter
from bot.llm.transcription import Transcriber
from bot.media.audio import UnreadableAudio, audio_duration, upload_name
from bot.media.images import UnreadableImage, prepare_image
from bot.media.language import language_code, photo_question
from bot.media.location import location_line
from bot.memory.location import remember_location
from bot.observability.metrics import MEDIA, MESSAGES
from bot.storage.facts import FactStore
from bot.storage.records import decode_facts

log = structlog.get_logger(__name__)

#: Photo types the model takes (WhatsApp stickers are WebP).
PHOTO_SUBTYPES = ("jpeg", "jpg", "png", "webp")
#: Attachment families counted by name; anything else is "other".
OTHER_KINDS = ("audio", "image", "video", "application", "text")
#: The quote of what was heard is cut to this many characters.
ECHO_CHARS = 160


class Fetched(Protocol):
    """What a MediaSource returns."""

    data: bytes
    content_type: str


class MediaSource(Protocol):
    """Where attachments come from (the channel: Twilio's Media URLs)."""

    def fetch(self, url: str, message_sid: str, *, max_bytes: int, deadline_s: float) -> Fetched:
        """Return the attachment's bytes, or raise MediaUnavailable."""


def echo(transcript: str) -> str:
    """Return the short quote of what was heard that starts the reply."""
    heard = transcript if len(transcript) <= ECHO_CHARS else transcript[: ECHO_CHARS - 1].rstrip() + "…"
    return f"{SPOKEN_MARK}“{heard}”\n\n"


class MediaStep:
    """Turn the message's attachment into text (and an image part) the later steps handle."""

    name = "media"
    records = False
    reads = ("stored.claim", "stored.context", "heard.language")
    writes = ("heard.text", "heard.stored_text", "heard.transcript", "heard.reply_prefix", "heard.image",
              "heard.language", "heard.told", "answer.reply", "answer.reason")

    def __init__(
        self, settings: MediaSettings, source: MediaSource | None, transcriber: Transcriber | None,
        facts: FactStore | None, counter: TokenCounter, catalog: Catalog, *, redis_worst_s: float,
        image_room: int, placeholders: bool,
    ) -> None:
        self.settings = settings
        self.catalog = catalog  # the bot's own words (docs/languages.md)
        self.source = source
        self.transcriber = transcriber
        self.facts = facts
        self.counter = counter
        # Kept for the reply: the model's minimum, and the commit and hand-off at worst.
        self.reserve_s = MIN_MODEL_AFTER_MEDIA_S + 2 * redis_worst_s
        # The prompt's budget less the frame and the memory block's share: a photo and its caption fit in it.
        self.image_room = image_room
        self.placeholders = placeholders  # MEDIA_PLACEHOLDERS

    def __call__(self, turn: Turn) -> None:
        msg = turn.msg
        if not msg.has_attachment:
            return
        caption = msg.body.strip()
        if not msg.media:
            assert msg.location is not None
            turn.heard.text = location_line(msg.location, caption)
            self._count("location", "answered")
            if self.facts is not None and turn.stored.claim is not None and not turn.stored.memory.opted_out:
                try:
                    remember_location(self.facts, msg.user, msg.location)
                except StoreUnavailable as err:  # the answer still knows where they are
                    log.warning("store.unavailable", stage="location_fact", error=str(err))
            return
        item = msg.media[0]
        if len(msg.media) > 1:  # WhatsApp sends one per message; another channel might not
            log.info("media.extra_ignored", count=len(msg.media) - 1)
        if item.family == "audio" and self.settings.VOICE:
            self._voice(turn, item)
        elif item.family == "image" and item.subtype in PHOTO_SUBTYPES and self.settings.VISION:
            self._photo(turn, item, caption)
        else:
            self._other(turn, caption)

    # -- kinds ---------------------------------------------------------------------------
    def _voice(self, turn: Turn, item: MediaItem) -> None:
        data = self._download(turn, item, "voice", self.settings.MEDIA_MAX_BYTES)
        if data is None:
            return
        try:
            seconds = audio_duration(data)
        except UnreadableAudio as err:
            self._refuse(turn, "voice", "unreadable", self._say(turn, "voice_failed"), detail=str(err), bytes=len(data))
            return
        if seconds > self.settings.VOICE_MAX_SECONDS:
            self._refuse(turn, "voice", "too_long", self._too_long(turn), seconds=round(seconds, 1), bytes=len(data))
            return
        if self.transcriber is None:
            self._refuse(turn, "voice", "transcription_failed", self._say(turn, "voice_failed"), detail="no transcriber")
            return
        hint = self.settings.TRANSCRIPTION_LANGUAGE or self._language(turn) or turn.stored.context.language or None
        try:
            transcript = self.transcriber.transcribe(
                data, filename=upload_name(item.subtype), content_type=item.content_type, audio_seconds=seconds,
                language=hint, deadline_s=turn.remaining() - self.reserve_s,
            )
        except TranscriptionUnavailable as err:
            self._refuse(turn, "voice", "transcription_failed", self._say(turn, "voice_failed"), detail=err.reason,
                         seconds=round(seconds, 1))
            return
        self._told(turn, transcript.text)
        turn.heard.text = transcript.text
        turn.heard.stored_text = f"{SPOKEN_MARK}{transcript.text}"
        turn.heard.transcript = transcript
        if self.settings.VOICE_ECHO:
            turn.heard.reply_prefix = echo(transcript.text)
        self._count("voice", "answered")
        log.info("media.voice", bytes=len(data), seconds=round(seconds, 1), chars=len(transcript.text))
        log.debug("media.transcript", text=transcript.text)

    def _photo(self, turn: Turn, item: MediaItem, caption: str) -> None:
        data = self._download(turn, item, "photo", self.settings.IMAGE_MAX_BYTES)
        if data is None:
            return
        self._told(turn, caption)
        text = caption or photo_question(turn.heard.language)
        try:
            image = prepare_image(
                data, detail=self.settings.IMAGE_DETAIL, max_side=self.settings.image_side_px,
                max_tokens=self._image_room(text),
            )
        except UnreadableImage as err:
            self._refuse(turn, "photo", "unreadable", self._say(turn, "photo_unreadable"), detail=str(err), bytes=len(data))
            return
        turn.heard.text = text
        turn.heard.stored_text = f"{PHOTO_MARK} {caption}" if caption else PHOTO_MARK
        turn.heard.image = image
        self._count("photo", "answered")
        log.info("media.photo", bytes=len(data), format=image.format, width=image.width, height=image.height,
                 detail=image.detail, image_tokens=image.tokens, caption=bool(caption))

    def _other(self, turn: Turn, caption: str) -> None:
        """Video, documents, contacts, or media turned off: a placeholder, the caption, or a polite reply."""
        family = turn.msg.media[0].family
        kind = family if family in OTHER_KINDS else "other"  # a bounded label, whatever was sent
        if self.placeholders:
            placeholder = media_placeholder(turn.msg.media_types)
            turn.heard.text = f"{placeholder} {caption}".strip()
            self._count(kind, "placeholder")
        elif caption:
            turn.heard.text = caption
            self._count(kind, "caption_only")
        else:
            reply = unsupported_media_reply(self.catalog, turn.heard.language, self.settings.VOICE, self.settings.VISION)
            self._refuse(turn, kind, "not_supported", reply, reason=filtering.REASON_NON_TEXT)

    # -- helpers -------------------------------------------------------------------------
    def _download(self, turn: Turn, item: MediaItem, kind: str, max_bytes: int) -> bytes | None:
        """Return the attachment's bytes, or settle a polite reply and return None."""
        if self.source is None:
            self._refuse(turn, kind, "refused", self._say(turn, "media_failed"), detail="no media source")
            return None
        budget = min(self.settings.MEDIA_FETCH_TIMEOUT_S, turn.remaining() - self.reserve_s)
        started = time.perf_counter()
        try:
            fetched = self.source.fetch(item.ref, turn.msg.sid, max_bytes=max_bytes, deadline_s=max(budget, 0.1))
        except MediaUnavailable as err:
            outcome = "refused" if err.refused else "too_large" if err.reason == "too_large" else "fetch_failed"
            reply = self._say(turn, "photo_too_large" if outcome == "too_large" and kind == "photo" else "media_failed")
            if outcome == "too_large" and kind == "voice":
                reply = self._too_long(turn)
            self._refuse(turn, kind, outcome, reply, detail=err.reason,
                         ms=round((time.perf_counter() - started) * 1000))
            return None
        return fetched.data

    def _image_room(self, text: str) -> int:
        """Return the tokens a photo may take: the prompt's budget less the frame, the
        memory block's share and the caption, so the image always fits."""
        return self.image_room - self.counter.count(text) - 8

    def _told(self, turn: Turn, text: str) -> None:
        """A transcript or a caption says which language the user writes in: the bot's own
        words follow it (docs/languages.md)."""
        told = language.detect(text, self.catalog)
        if told is not None:
            turn.heard.told = turn.heard.language = told

    def _too_long(self, turn: Turn) -> str:
        """Return the polite "send a shorter one" in the user's language."""
        limit = self.settings.VOICE_MAX_SECONDS
        if limit % 60 == 0:
            duration = self._say(turn, "minute") if limit == 60 else self._say(turn, "minutes", n=limit // 60)
        else:
            duration = self._say(turn, "seconds", n=limit)
        return self._say(turn, "voice_too_long", limit=duration)

    def _language(self, turn: Turn) -> str | None:
        """Return the user's language from their stored facts, if one is known."""
        facts = decode_facts(turn.stored.memory.facts)
        fact = facts.get("language")
        return language_code(fact.value) if fact is not None else None

    def _say(self, turn: Turn, key: str, **values: object) -> str:
        """Return one of the bot's own replies, in the user's language."""
        return self.catalog.text(key, turn.heard.language, **values)

    def _refuse(self, turn: Turn, kind: str, outcome: str, reply: str, reason: str | None = None, **fields: object) -> None:
        """Settle a polite reply for an attachment we could not use; log and count it."""
        reason = reason or f"media_{outcome}"
        event = {"refused": "media.refused", "not_supported": "media.unsupported"}.get(outcome, "media.failed")
        level = log.info if outcome == "not_supported" else log.warning
        level(event, kind=kind, outcome=outcome, content_type=turn.msg.media_types[0] if turn.msg.media else "",
              **fields)
        log.info("pair.rejected", reason=reason)
        self._count(kind, outcome)
        MESSAGES.labels(outcome="rejected", reason=reason).inc()
        turn.settle(reply, reason=reason)

    @staticmethod
    def _count(kind: str, outcome: str) -> None:
        MEDIA.labels(kind=kind, outcome=outcome).inc()
