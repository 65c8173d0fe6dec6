"""What the words around a candidate name say about it (bot/memory/matching.py): whether
it is written as a name, part of a longer name, the name of goods ("Valencia oranges"), or
a name's initials. Pure functions of the message's words.
"""

from __future__ import annotations

from bot.memory.lexicon import (
    ACRONYMS,
    BEFORE_A_NAME,
    CALENDAR,
    NAME_JOINERS,
    NAMESAKE_GOODS,
    STOPWORDS,
    VENUES,
)
from bot.memory.names import Gram, normalize_name

#: How many letters initials standing for a name have ("JP" for Jean-Paul, "KL").
MIN_INITIALS, MAX_INITIALS = 2, 5
#: Types that lend their names to goods ("Valencia oranges", "Caesar salad").
NAMESAKE_TYPES = frozenset({"PLACE", "PERSON"})


def capitalised(word: str) -> bool:
    """Return whether a word is written like a name (Capitalised, not all capitals: "OK", "I")."""
    return word[:1].isupper() and not word.isupper() and normalize_name(word) not in CALENDAR


def _goods(word: str) -> bool:
    """Return whether a word is goods named after places and people, plural or not."""
    norm = normalize_name(word)
    forms = [norm]
    if norm.endswith("s"):  # "oranges", "cherries", "fries": only plural endings come off
        forms += [norm[:-1], norm[:-2] if norm.endswith("es") else "", norm[:-3] + "y" if norm.endswith("ies") else ""]
    return any(form in NAMESAKE_GOODS for form in forms if form)


def names_goods(tokens: list[str], ends: list[bool], gram: Gram) -> bool:
    """Return whether the words after a name make it the name of goods ("Valencia oranges",
    "Boston cream pie"): not after a possessive ("Valencia's oranges"), and not when a place
    to get them follows ("Boston coffee shops")."""
    after = gram.start + gram.size
    if after >= len(tokens) or ends[after - 1] or not tokens[after].islower() or not _goods(tokens[after]):
        return False
    return after + 1 >= len(tokens) or normalize_name(tokens[after + 1]) not in VENUES


def initials_of_a_name(gram: Gram) -> bool:
    """Return whether a message word may be a name's initials: capitals only ("JP", "KL"),
    not a word or an abbreviation everyone uses ("OK", "UK", "LOL")."""
    text = gram.text
    return (MIN_INITIALS <= len(text) <= MAX_INITIALS and text.isalpha() and text.isupper()
            and gram.norm not in STOPWORDS and gram.norm not in ACRONYMS)


def _continues_name(word: str, shouting: bool) -> bool:
    """Return whether the word before a name is written as part of it: Capitalised, or in
    capitals that are no everyday abbreviation ("HBO Max"), unless the whole sentence is."""
    if capitalised(word):
        return True
    return (not shouting and len(word) >= 2 and word.isalpha() and word.isupper()
            and normalize_name(word) not in ACRONYMS and normalize_name(word) not in STOPWORDS)


def inside_longer_name(
    tokens: list[str], ends: list[bool], at: int, known: frozenset[str] = frozenset(), shouting: bool = False
) -> bool:
    """Return whether the word at `at` is part of a longer capitalised name: a capitalised
    word right after it, or before it (not the sentence's first word, not a title such as
    "Dr" or "Aunt"), also across a joiner ("Bank of America"), unless the user knows that
    word too ("to Abeokuta for Funke's wedding": two of their names). A possessive ends a
    name: in "Ana's Porto flat" Ana and Porto are two."""
    def neighbour(step: int) -> str:
        i = at + step
        if 0 <= i < len(tokens) and normalize_name(tokens[i]) in NAME_JOINERS:
            i += step
            if 0 <= i < len(tokens) and normalize_name(tokens[i]) in known:
                return ""
        if not (0 <= i < len(tokens)) or (step < 0 and i == 0):
            return ""
        if ends[min(i, at)]:  # a possessive between the two words
            return ""
        return tokens[i]

    after, before = neighbour(1), neighbour(-1)
    # Capitals after a name are usually a technical word ("Airflow DAG", "Python API").
    return capitalised(after) or (_continues_name(before, shouting) and normalize_name(before) not in BEFORE_A_NAME)
