"""How entity names are compared: one normalization for stored names and incoming text alike.

`normalize_name("São Paulo")` is "sao paulo": Unicode NFKD with the combining marks dropped,
case folded, every run of other characters than letters and digits one space. An entity's
normalized key is `TYPE:normalized name` ("PET:rex"), so the same thing written with other
case, accents or punctuation is one entity, not two.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Container, NamedTuple

_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s?$")

#: Entity types whose names take a plural ("my Kindles", "the Teslas"): their level-2 match
#: also tries a message word without its plural ending. Never names of people, pets or
#: places: "Lucas" is not the plural of "Luca".
PLURAL_TYPES = frozenset({"PRODUCT", "TOOL", "SYSTEM", "PROJECT", "EVENT", "CONCEPT", "FILE", "SKILL"})


#: Letters that Unicode does not decompose into a base letter and a mark, spelt as users
#: write them without the diacritic ("Malgorzata", "Kadikoy", "Dang", "Bjorn").
_UNDECOMPOSED = str.maketrans({
    "ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "ı": "i", "ħ": "h",
    "Ħ": "H", "ŧ": "t", "Ŧ": "T", "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "þ": "th", "Þ": "Th",
})


def fold(text: str) -> str:
    """Return text with accents dropped and case folded, characters otherwise kept."""
    if text.isascii():  # nothing to decompose: most chat words
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSED))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def normalize_name(name: str) -> str:
    """Return the comparable form of a name: folded, letters and digits, single spaces."""
    return _NOT_ALNUM.sub(" ", fold(name)).strip()


def words(text: str) -> list[str]:
    """Return the words of a text, a possessive ending dropped ("Ana's" is Ana)."""
    return [_POSSESSIVE.sub("", w) for w in _WORD.findall(text)]


def split_words(text: str) -> tuple[list[str], list[bool]]:
    """Return `words(text)` and, for each, whether it ended in a possessive ("Ana's")."""
    raw = _WORD.findall(text)
    return [_POSSESSIVE.sub("", w) for w in raw], [bool(_POSSESSIVE.search(w)) for w in raw]


def comparable(text: str) -> str:
    """Return how a name or a run of message words is compared: its words, normalized."""
    return normalize_name(" ".join(words(text)))


def initials(parts: list[str], capitals_only: bool = False) -> str:
    """Return the initials of a name's words, of every word or of its capitalised ones
    ("Bank of America": "boa", or "ba")."""
    return "".join(w[0] for w in parts if w and (not capitals_only or w[:1].isupper())).lower()


def entity_key(entity_type: str, name: str) -> str:
    """Return an entity's normalized key, `TYPE:normalized name`."""
    return f"{entity_type.upper()}:{normalize_name(name)}"


class Gram(NamedTuple):
    """A run of consecutive words of a message, as written and normalized (a tuple: a
    message makes a hundred of them)."""

    text: str  # as written, words joined by one space
    norm: str  # normalize_name(text)
    start: int  # index of its first word
    size: int  # how many words


def word_grams(
    message: str, max_words: int, found: list[str] | None = None, starts: Container[tuple[int, str]] | None = None
) -> list[Gram]:
    """Return every run of 1..max_words consecutive words of the message (`found`: its
    words, when the caller has them; `starts`: the (words, first letter) of the names looked
    for, when runs of two words or more that start no name can be left out)."""
    found = words(message) if found is None else found
    normal = [normalize_name(w) for w in found]  # each word once: a run's is its words' joined
    grams = [Gram(word, norm, i, 1) for i, (word, norm) in enumerate(zip(found, normal)) if norm]
    every_word_counts = all(normal)  # then a run's normal form is a plain join
    for size in range(2, max_words + 1):
        for start in range(len(found) - size + 1):
            part = normal[start : start + size]
            norm = " ".join(part) if every_word_counts else " ".join(n for n in part if n)
            if norm and (starts is None or (size, norm[0]) in starts
                         or (norm.count(" ") + 1, norm[0]) in starts):  # "Rock'n Roll": 3 words, 4 forms
                grams.append(Gram(" ".join(found[start : start + size]), norm, start, size))
    return grams


def singular_forms(norm: str) -> tuple[str, ...]:
    """Return what a normalized word run may be the plural of ("kindles" -> "kindle")."""
    if len(norm) < 4 or not norm.endswith("s") or norm.endswith("ss"):
        return ()
    forms = [norm[:-1]]
    if norm.endswith("es"):
        forms.append(norm[:-2])
    return tuple(forms)
