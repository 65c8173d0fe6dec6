"""The user's language, from their stored facts: a hint for transcription, and the words of
the question asked about a photo sent without a caption."""

from __future__ import annotations

#: Language names (English and their own) as users and the extraction model write them.
CODES = {
    "english": "en", "portuguese": "pt", "português": "pt", "portugues": "pt", "spanish": "es",
    "español": "es", "espanol": "es", "castellano": "es", "french": "fr", "français": "fr",
    "francais": "fr", "german": "de", "deutsch": "de", "italian": "it", "italiano": "it",
    "dutch": "nl", "nederlands": "nl", "polish": "pl", "polski": "pl", "turkish": "tr", "türkçe": "tr",
    "arabic": "ar", "hindi": "hi", "indonesian": "id", "bahasa indonesia": "id", "russian": "ru",
    "ukrainian": "uk", "japanese": "ja", "korean": "ko", "chinese": "zh", "mandarin": "zh",
    "swahili": "sw", "yoruba": "yo", "afrikaans": "af", "catalan": "ca", "català": "ca",
}

#: "What is in this photo?" in the languages above that we have it in.
PHOTO_QUESTION = {
    "en": "What is in this photo?",
    "pt": "O que há nesta foto?",
    "es": "¿Qué hay en esta foto?",
    "fr": "Qu'y a-t-il sur cette photo ?",
    "de": "Was ist auf diesem Foto?",
    "it": "Cosa c'è in questa foto?",
    "nl": "Wat staat er op deze foto?",
    "pl": "Co jest na tym zdjęciu?",
    "tr": "Bu fotoğrafta ne var?",
    "id": "Apa yang ada di foto ini?",
}


def language_code(value: str | None) -> str | None:
    """Return the ISO 639-1 code of a stored language fact ("Portuguese", "pt-BR", "pt"), or
    None when it names none we know (a list of languages names the first)."""
    if not value:
        return None
    first = value.split(",")[0].strip().casefold()
    if first in CODES:
        return CODES[first]
    head = first.replace("_", "-").split("-")[0]
    if len(head) == 2 and head.isalpha() and head in CODES.values():
        return head
    return None


def photo_question(language: str | None) -> str:
    """Return the question asked about a photo without a caption, in the user's language."""
    return PHOTO_QUESTION.get(language or "en", PHOTO_QUESTION["en"])
