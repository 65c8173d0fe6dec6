"""The few exceptions the bot raises across its boundaries."""


class BotError(Exception):
    """Base class for the bot's own errors."""


class ConfigError(BotError):
    """A setting is missing or malformed; raised at startup, never at the first message."""


class LLMUnavailable(BotError):
    """The model could not answer: timeout, rate limit, server error or refused connection."""


class StoreUnavailable(BotError):
    """Redis could not be reached or answered with an error."""


class InvalidInbound(BotError):
    """A webhook form that is not a usable WhatsApp message."""


class MediaUnavailable(BotError):
    """An attachment could not be had: refused before any request (not a Twilio Media URL of
    our account), or the fetch failed (401, 404, timeout, too big, cut connection).

    `reason` is a short slug for logs and metrics; `refused` is True when nothing was requested.
    """

    def __init__(self, reason: str, detail: str = "", *, refused: bool = False) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.refused = refused


class TranscriptionUnavailable(BotError):
    """A voice note could not be transcribed: error, timeout, or nothing heard."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
