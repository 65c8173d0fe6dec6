"""What the bot says when the model does not (docs/languages.md): apologies, refusals and
command confirmations, in the user's language.

The texts live in the catalogs (prompts/replies.<language>.toml, bot/conversation/catalog.py),
which the message path reads through the one in use (PROMPTS_DIR). The names below are the
shipped English texts, for tests and docs: code that answers a user asks the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import DEFAULT_PROMPTS_DIR
from bot.conversation.catalog import Catalog, load_catalog


def shipped() -> Catalog:
    """Return the shipped catalogs (English, Portuguese, Spanish)."""
    return load_catalog(DEFAULT_PROMPTS_DIR, DEFAULT_PROMPTS_DIR)


def _en(key: str) -> str:
    return shipped().texts["en"][key]


FALLBACK_REPLY = _en("fallback")
NON_TEXT_REPLY = _en("non_text")
EMPTY_MESSAGE_REPLY = _en("empty_message")
RESET_REPLY = _en("reset")
OPERATOR_RESET_REPLY = _en("operator_reset")
OPT_OUT_REPLY = _en("opt_out")
OPT_IN_REPLY = _en("opt_in")
ERASE_CONFIRM_REPLY = _en("erase_confirm")
ERASED_REPLY = _en("erased")
RATE_LIMITED_REPLY = _en("rate_limited")
BUSY_REPLY = _en("busy")
COMMAND_UNAVAILABLE_REPLY = _en("command_unavailable")
MEDIA_FAILED_REPLY = _en("media_failed")
PHOTO_TOO_LARGE_REPLY = _en("photo_too_large")
PHOTO_UNREADABLE_REPLY = _en("photo_unreadable")
VOICE_TOO_LONG_REPLY = _en("voice_too_long")
VOICE_FAILED_REPLY = _en("voice_failed")
TASK_OFF_REPLY = _en("task_off")
TASK_ON_REPLY = _en("task_on")
HELP_REPLY = _en("help")


@dataclass(frozen=True)
class BotWords:
    """The bot's own words where no turn chose a language (a webhook that failed, a busy
    REST reply): the message's own language when it tells, else the business's."""

    catalog: Catalog
    default: str  # BOT_LANGUAGE

    def for_message(self, key: str, body: str) -> str:
        """Return a reply in the language the message was written in."""
        from bot.conversation.language import detect

        return self.catalog.text(key, detect(body, self.catalog) or self.default)


def unsupported_media_reply(catalog: Catalog, language: str, voice: bool, vision: bool) -> str:
    """Return the polite reply to an attachment the bot cannot read, naming what it can."""
    if not (voice or vision):
        return catalog.text("non_text", language)  # text only, as before voice notes and photos
    what = "what_voice_and_photos" if voice and vision else "what_voice" if voice else "what_photos"
    return catalog.text("unsupported_media", language, what=catalog.text(what, language))


#: Placeholder stored for media when MEDIA_PLACEHOLDERS is on, by MIME type family.
MEDIA_PLACEHOLDERS = {
    "image": "[Image received]",
    "audio": "[Voice message received]",
    "video": "[Video received]",
    "application": "[Document received]",
}


def media_placeholder(media_types: tuple[str, ...]) -> str:
    """Return the placeholder text that stands for attachments (a shared location is never
    one: it is read as a line of text, bot/media/location.py)."""
    return " ".join(MEDIA_PLACEHOLDERS.get(t.split("/", 1)[0], "[Attachment received]") for t in media_types)

