"""The bot's own words, one catalog per language (docs/languages.md): every fixed reply, the
phrases of the users' commands, and short words that tell a language.

The catalogs are TOML files beside the prompts (`prompts/replies.<language>.toml`), so an
operator changes a text the way they change a prompt: a copy of prompts/ named by
PROMPTS_DIR (a copy without the catalogs keeps the shipped ones). Every language has every
key, or the process refuses to start naming what is missing; a reply asked in a language
without a catalog is given in English.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bot.exceptions import ConfigError

#: The languages the bot speaks, its first the one of last resort.
LANGUAGES = ("en", "pt", "es")

_NOT_WORD = re.compile(r"[^\w\s/#+]")
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lower-case, drop punctuation (keeping / # +) and collapse white space: how a message
    is compared with a command's phrases ("Don't remember me!" is "dont remember me")."""
    text = text.lower().replace("'", "").replace("\u2019", "")
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", text)).strip()


@dataclass(frozen=True)
class Catalog:
    """Every language's texts, command phrases and telling words."""

    texts: dict[str, dict[str, str]]  # language -> reply key -> text
    phrases: dict[str, dict[str, tuple[str, ...]]]  # language -> command -> normalized phrases
    telling: dict[str, frozenset[str]]  # language -> normalized short messages that tell it
    version: str

    def text(self, key: str, language: str | None, **values: object) -> str:
        """Return a reply in this language (English when the language has no catalog), its
        {names} filled in."""
        texts = self.texts.get(language or "", self.texts[LANGUAGES[0]])
        return texts[key].format(**values) if values else texts[key]

    def command_phrases(self, command: str) -> tuple[str, ...]:
        """Return a command's phrases in every language."""
        return tuple(p for language in LANGUAGES for p in self.phrases[language].get(command, ()))

    def language_of(self, normalized: str) -> str | None:
        """Return the one language whose command phrases or telling words are this whole
        message; None when none, or more than one, has it ("por favor"). A slash command in
        English is every language's ("/reset", "/reminders"); one in another language tells
        it ("/lembretes", "/recordatorios")."""
        if normalized.startswith("/") and any(normalized in p for p in self.phrases[LANGUAGES[0]].values()):
            return None
        found = {language for language in LANGUAGES
                 if normalized in self.telling[language]
                 or any(normalized in phrases for phrases in self.phrases[language].values())}
        return found.pop() if len(found) == 1 else None


def _load(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: {err}") from err


@lru_cache(maxsize=8)
def load_catalog(directory: Path, shipped: Path) -> Catalog:
    """Return the catalogs of `directory` (PROMPTS_DIR), or the shipped ones where it has
    none; raise ConfigError naming any text or command a language lacks."""
    raw = {}
    for language in LANGUAGES:
        own = directory / f"replies.{language}.toml"
        raw[language] = _load(own if own.is_file() else shipped / f"replies.{language}.toml")
    keys = set(raw[LANGUAGES[0]].get("replies", {}))
    commands = set(raw[LANGUAGES[0]].get("commands", {}))
    missing = [f"replies.{language}.toml: {kind} {name!r}"
               for language in LANGUAGES
               for kind, expected, have in (("reply", keys, raw[language].get("replies", {})),
                                            ("command", commands, raw[language].get("commands", {})))
               for name in sorted(expected - set(have))]
    if missing:
        raise ConfigError("the catalogs of the bot's own words lack: " + "; ".join(missing))
    return Catalog(
        texts={language: {k: str(v) for k, v in raw[language]["replies"].items()} for language in LANGUAGES},
        phrases={language: {k: tuple(p for p in (normalize(x) for x in v) if p)
                            for k, v in raw[language]["commands"].items()} for language in LANGUAGES},
        telling={language: frozenset(normalize(w) for w in raw[language].get("words", {}).get("telling", ()))
                 for language in LANGUAGES},
        version="/".join(f"{language}@{raw[language].get('version', '?')}" for language in LANGUAGES),
    )
