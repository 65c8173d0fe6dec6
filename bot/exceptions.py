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
