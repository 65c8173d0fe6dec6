"""Which language a message is written in, among the bot's own (docs/languages.md): its fixed
replies follow the user's.

A message that is a command's phrase or a telling word ("sim", "gracias", "apaga os meus
dados") is in that phrase's language; one with a letter only one language writes (ã, ç; ñ,
¿) is in that language; a longer one is told by py3langid (langid.py's model, bundled),
asked to choose among the bot's languages only, when it is sure. Anything else ("ok", a
name, an emoji) tells nothing: the caller then uses the user's last known language.
"""

from __future__ import annotations

import threading
from typing import Any

from bot.conversation.catalog import LANGUAGES, Catalog, normalize

#: Letters that one of the bot's languages writes and the others do not.
MARKS = {"ã": "pt", "õ": "pt", "ç": "pt", "â": "pt", "ê": "pt", "ô": "pt", "à": "pt", "ñ": "es", "¿": "es", "¡": "es"}
#: Words a message needs before the statistical model is asked (fewer tell it little).
MIN_WORDS = 3
#: How sure the model must be (its probability among the bot's languages).
MIN_PROBABILITY = 0.9

_lock = threading.Lock()
_identifier: Any = None


def identifier() -> Any:
    """Return py3langid's identifier limited to the bot's languages, loaded once per process:
    about half a second and 60 MB, so the web loads it at start and a worker's job only when
    a transcript needs it (bot/message_path.py)."""
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            model.set_languages(list(LANGUAGES))
            # set_languages keeps the other 94 languages' columns for a later reset; we never
            # reset, so let them go (about 27 MB).
            model._full_model = (model.nb_ptc, model.nb_pc, model.nb_classes)
            _identifier = model
    return _identifier


def detect(text: str | None, catalog: Catalog) -> str | None:
    """Return the language a message is written in, or None when it does not tell."""
    norm = normalize(text or "")
    if not norm:
        return None
    known = catalog.language_of(norm)
    if known is not None:
        return known
    lowered = (text or "").lower()
    marked = {language for mark, language in MARKS.items() if mark in lowered}
    if len(marked) == 1:
        return marked.pop()
    if len(norm.split()) < MIN_WORDS:
        return None
    language, probability = identifier().classify(text)
    return str(language) if probability >= MIN_PROBABILITY else None


def choose(detected: str | None, *known: str | None, default: str) -> str:
    """Return the language to answer in: the message's, else the first known one the bot
    speaks (the user's last, their language fact), else the business's (BOT_LANGUAGE)."""
    for language in (detected, *known):
        if language in LANGUAGES:
            return str(language)
    return default
