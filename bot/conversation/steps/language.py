"""The language step: which language the bot's own replies to this message are in
(docs/languages.md).

The message's own language when it tells (bot/conversation/language.py); else the last one
the user wrote in (kept in their context by the commit); else their language fact; else the
business's (BOT_LANGUAGE). A voice note tells once it is heard: the media step looks again
at its transcript.
"""

from __future__ import annotations

from bot.conversation import language
from bot.conversation.catalog import Catalog
from bot.conversation.turn import Turn
from bot.media.language import language_code
from bot.storage.records import Fact


class LanguageStep:
    """Choose the language of the bot's own words for this message."""

    name = "language"
    records = False
    reads = ("stored.context", "stored.claim")
    writes = ("heard.language", "heard.told")

    def __init__(self, catalog: Catalog, default: str, preload: bool = True) -> None:
        self.catalog = catalog
        self.default = default  # BOT_LANGUAGE
        if preload:  # the web: loaded now, not on a user's first message
            language.identifier()

    def __call__(self, turn: Turn) -> None:
        told = None if turn.msg.has_attachment else language.detect(turn.msg.body, self.catalog)
        raw = turn.stored.memory.facts.get("language")
        fact = Fact.from_json("language", raw) if raw else None
        turn.heard.told = told
        turn.heard.language = language.choose(told, turn.stored.context.language or None,
                                              language_code(fact.value) if fact else None, default=self.default)
