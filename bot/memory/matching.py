"""Message-time entity matching (docs/entities.md), with no model call: which of the user's
known entities does this message name?

Runs of 1..4 words of the message are compared with every name and alias, in three levels;
each match carries its level and score:
1. exact: the words as written equal a name ("Rex");
2. normalized: equal once case, accents, punctuation and a possessive are set aside ("rex's",
   "SÃO PAULO"); a plural counts for things that take one ("my Kindles");
3. fuzzy: rapidfuzz's ratio >= ENTITY_FUZZY_THRESHOLD against names of the same number of
   words and the same first letter ("Lisbn", "Rexy"), over words not matched already;
   then, over those words too, a capitalised short form of a person's or a pet's first name
   ("Kev", "Luki": nickname) and the capitals of a name of two words or more ("JP", "KL":
   initials).

Common words a name may also be ("apple", "rocky") match only when written with a capital;
a name right before goods named after it is the goods ("Valencia oranges", word lists in
bot/memory/lexicon.py).
An index is built once per user and entities version, and kept per process (IndexCache).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable

from rapidfuzz import fuzz, process

from bot.memory.names import (
    PLURAL_TYPES,
    Gram,
    comparable,
    initials,
    normalize_name,
    singular_forms,
    split_words,
    word_grams,
    words,
)
from bot.memory.lexicon import (
    ARTICLES,
    COMMON_WORDS,
    DIMINUTIVE_ENDINGS,
    NAME_ABBREVIATIONS,
    ORDINARY_WORDS,
    PERSON_BEFORE,
    STOPWORDS,
    TITLES,
)
from bot.memory.surroundings import (
    MAX_INITIALS,
    MIN_INITIALS,
    NAMESAKE_TYPES,
    capitalised,
    initials_of_a_name,
    inside_longer_name,
    names_goods,
)
from bot.storage.entities import Entity, EntityStore

#: Longest name, in words, looked for in a message.
MAX_NAME_WORDS = 4
#: Names shorter than this are never matched fuzzily: too many near neighbours.
MIN_FUZZY_CHARS = 3
#: A message word shorter than this is never a misspelling of a name ("lol" is not "Lolo").
MIN_FUZZY_WORD = 4


@dataclass(frozen=True)
class EntityMatch:
    """One known entity a message names."""

    key: str
    name: str
    type: str
    strategy: str  # exact, normalized, fuzzy, nickname, initials (or model: the task call)
    score: float  # the ratio for fuzzy, the share kept for nickname, else 1.0
    text: str  # the message's words that matched

    def to_public(self) -> dict[str, Any]:
        """Return the match as the admin API and the CLI show it."""
        return {"key": self.key, "name": self.name, "type": self.type, "strategy": self.strategy,
                "score": round(self.score, 3), "text": self.text}

    def explain(self) -> str:
        """Return why it matched, for a person: "entity Rex, fuzzy 0.91"."""
        how = self.strategy if self.strategy in ("exact", "normalized", "initials") else f"{self.strategy} {self.score:.2f}"
        return f"entity {self.name}, {how}"


_SENTENCES = re.compile(r"[.!?;\n]+(?:\s|$)|\n")
_TITLE = re.compile(r"\b(" + "|".join(map(re.escape, sorted(TITLES))) + r")\.(?=\s)", re.IGNORECASE)
_RANK = {"exact": 0, "normalized": 1, "fuzzy": 2, "nickname": 3, "initials": 3}
#: Types whose names are proper names: a capitalised word right after one means a longer
#: name ("Dakar Rally", "Kwame Nkrumah"), not this entity.
PROPER_TYPES = frozenset({"PERSON", "PET", "PLACE", "ORG", "EVENT"})
#: Types people shorten ("Kev" for Kevin, "Benja" for Benjamin), and how much of the name a
#: short form must keep.
NICKNAME_TYPES = frozenset({"PERSON", "PET"})
MIN_NICKNAME_SHARE = 0.35
def name_forms(entity: Entity) -> list[str]:
    """Return the names a message may use for an entity: the name, the aliases, and for a
    person with a full name its first and last names ("Fernando", "Matusse"). Not a
    product's model without its brand: too many are words ("a Carnival cruise")."""
    forms = entity.names()
    if entity.type == "PERSON":
        for name in entity.names():
            parts = name.split()
            if len(parts) > 1:
                forms += [p for p in (parts[0], parts[-1])  # "Hazel", "Wolf": names, unless in lower case
                          if len(p) >= MIN_FUZZY_CHARS and normalize_name(p) not in STOPWORDS]
    return list(dict.fromkeys(forms))


def nickname_share(word: str, name: str, endings: bool = True) -> float:
    """Return how much of `name` a short form `word` keeps ("Kev" of "kevin": 0.6), with a
    diminutive ending allowed after it ("Luki": "luk" + "i"); 0 when it is not one."""
    stems = [word] + [word[: -len(e)] for e in DIMINUTIVE_ENDINGS if endings and word.endswith(e) and len(word) > len(e)]
    best = 0.0
    for stem in stems:
        if len(stem) >= MIN_FUZZY_CHARS and name.startswith(stem) and word != name:
            best = max(best, len(stem) / len(name))
    return best


class EntityIndex:
    """A user's entity names, arranged for matching."""

    def __init__(self, entities: Iterable[Entity]) -> None:
        self.entities = {e.key: e for e in entities}
        self.exact: dict[str, set[str]] = {}
        self.normal: dict[str, set[str]] = {}
        self.fuzzy: dict[tuple[int, str], list[tuple[str, str]]] = {}  # (words, initial) -> [(name, key)]
        self.nick: dict[str, list[tuple[str, str]]] = {}  # first 3 letters -> [(first name word, key)]
        self.initials: dict[str, set[str]] = {}  # "jp" -> keys of names of two words or more
        self.max_words = 1
        self.starts: set[tuple[int, str]] = set()  # (words, first letter) of every name
        abbreviations: set[str] = set()  # "St" of "St. Louis": its full stop ends no sentence
        for key, entity in self.entities.items():
            for name in name_forms(entity):
                norm = comparable(name)
                if not norm:
                    continue
                parts = words(name)
                size = min(len(norm.split()), MAX_NAME_WORDS)
                self.max_words = max(self.max_words, size)
                self.starts.update(((size, norm[0]), (len(norm.split()), norm[0]), (len(parts), norm[0])))
                abbreviations.update(w.casefold() for w in parts[:-1] if normalize_name(w) in NAME_ABBREVIATIONS)
                self.exact.setdefault(" ".join(name.split()), set()).add(key)
                self.normal.setdefault(norm, set()).add(key)
                if len(norm) >= MIN_FUZZY_CHARS:
                    self.fuzzy.setdefault((size, norm[0]), []).append((norm, key))
                first = norm.split()[0]
                if entity.type in NICKNAME_TYPES and len(first) >= MIN_FUZZY_CHARS:
                    self.nick.setdefault(first[:MIN_FUZZY_CHARS], []).append((first, key))
                if len(parts) > 1:  # "JP" for Jean-Paul, "KL" for Kuala Lumpur
                    for short in {initials(parts), initials(name.split()), initials(parts, True)}:
                        if MIN_INITIALS <= len(short) <= MAX_INITIALS:
                            self.initials.setdefault(short, set()).add(key)
        self.one_word = frozenset(n for n in self.normal if " " not in n)
        self.abbreviations = re.compile(r"\b(" + "|".join(map(re.escape, sorted(abbreviations))) + r")\.(?=\s)",
                                        re.IGNORECASE) if abbreviations else None
        self.fuzzy_names = {bucket: [name for name, _ in choices] for bucket, choices in self.fuzzy.items()}

    def _allowed(
        self, key: str, gram: Gram, tokens: list[str], ends: list[bool], careful: bool, strategy: str,
        shouting: bool = False,
    ) -> bool:
        """Return whether a candidate stands: written as a name where the writer capitalises,
        not a common word, not the start or end of a longer proper name."""
        entity = self.entities[key]
        if strategy != "exact" and careful and gram.size == 1 and gram.text.islower() and entity.name[:1].isupper():
            return False  # "lima beans", "strawberry mochi": the word, not the name
        if gram.size == 1 and gram.text.islower() and gram.norm in ORDINARY_WORDS:
            return False
        if gram.size == 1 and strategy in ("fuzzy", "nickname") and gram.norm in STOPWORDS:
            return False
        if gram.size == 1 and inside_longer_name(tokens, ends, gram.start, self.one_word, shouting):
            return False  # "Dakar Rally", "Instituto Cervantes", "Waiting for Godot"
        before = normalize_name(tokens[gram.start - 1]) if gram.start > 0 else ""
        if entity.type in NICKNAME_TYPES and before in ARTICLES:
            return False  # "an Elsa costume": a kind of thing, not the person
        if entity.type not in NICKNAME_TYPES and before in PERSON_BEFORE:
            return False  # "daughter Alexandra": a person, not the place Alexandria
        if entity.type in NAMESAKE_TYPES and names_goods(tokens, ends, gram):
            return False  # "Valencia oranges", "a Boston terrier": goods named after it
        if strategy == "fuzzy" and entity.type not in PLURAL_TYPES:
            name = comparable(entity.name)
            if gram.norm in (name + "s", name + "es"):  # the plural of a word, not a typo of the name
                return False
        return True

    def match(self, message: str, threshold: float) -> list[EntityMatch]:
        """Return the known entities the message names, best first (level, then score)."""
        if not self.entities or not message:
            return []
        hits: list[tuple[str, str, float, Gram]] = []
        # A name never runs across a full stop; the one of "Dr." or "św." ends no sentence.
        message = _TITLE.sub(r"\1", message)
        if self.abbreviations is not None:
            message = self.abbreviations.sub(r"\1", message)
        sentences = [s for s in _SENTENCES.split(message) if s.strip()]
        # Whether the writer capitalises at all (a phone does the first letter): then a
        # one-word name in lower case is the ordinary word ("strawberry mochi", "lima beans"),
        # not the pet or the city. A writer who never capitalises gets lower-case matches.
        split = [(sentence, *split_words(sentence)) for sentence in sentences]
        careful = any(t[:1].isupper() and t != "I" for _s, tokens, _e in split for t in tokens)
        for sentence, tokens, ends in split:
            hits += self._sentence_hits(sentence, tokens, ends, threshold, careful)
        return self._best(hits)

    def _sentence_hits(
        self, sentence: str, tokens: list[str], ends: list[bool], threshold: float, careful: bool
    ) -> list[tuple[str, str, float, Gram]]:
        """Return every candidate match in one sentence (its words and possessive ends given), by level."""
        hits: list[tuple[str, str, float, Gram]] = []
        matched_words: set[int] = set()
        shouting = all(t.isupper() for t in tokens if t.isalpha())  # "VOU A LISBOA": no initials
        grams = word_grams(sentence, self.max_words, tokens, self.starts)

        def take(keys: Iterable[str], strategy: str, score: float, gram: Gram) -> bool:
            if not keys:
                return False
            kept = [k for k in keys if self._allowed(k, gram, tokens, ends, careful, strategy, shouting)]
            hits.extend((k, strategy, score, gram) for k in kept)
            if kept:
                matched_words.update(range(gram.start, gram.start + gram.size))
            return bool(kept)

        for gram in grams:
            if take(self.exact.get(gram.text, ()), "exact", 1.0, gram):
                continue
            keys: set[str] = self.normal.get(gram.norm, set())
            for singular in singular_forms(gram.norm) if gram.norm[-1] == "s" else ():
                keys = keys | {k for k in self.normal.get(singular, ()) if self.entities[k].type in PLURAL_TYPES}
            take(keys, "normalized", 1.0, gram)
        cutoff = threshold * 100
        for gram in grams:
            if gram.size == 1 and gram.norm in STOPWORDS:  # never a misspelling, short form or initials
                continue
            if gram.start in matched_words or (gram.size > 1 and matched_words.intersection(
                    range(gram.start, gram.start + gram.size))):
                continue
            if gram.size == 1 and not shouting and initials_of_a_name(gram):
                take(self.initials.get(gram.norm, ()), "initials", 1.0, gram)
            if len(gram.norm) < MIN_FUZZY_CHARS:
                continue
            if len(gram.norm) >= MIN_FUZZY_WORD:
                choices = self.fuzzy.get((gram.size, gram.norm[0]))
                if choices:
                    names = self.fuzzy_names[(gram.size, gram.norm[0])]
                    for _name, score, at in process.extract(gram.norm, names, scorer=fuzz.ratio,
                                                            score_cutoff=cutoff, limit=3):
                        take([choices[at][1]], "fuzzy", score / 100, gram)
            # A common word is a name when capitalised inside a sentence ("my sister and Max"),
            # the word when it starts one ("Max 3 pages?", "Will it rain?").
            nick = self.nick.get(gram.norm[:MIN_FUZZY_CHARS]) if gram.size == 1 else None
            if nick and capitalised(gram.text) and (gram.start > 0 or gram.norm not in COMMON_WORDS):
                for first, key in nick:  # "Ruby" is no "Rub" + "y" for Ruben
                    share = nickname_share(gram.norm, first, endings=gram.norm not in COMMON_WORDS)
                    if share >= MIN_NICKNAME_SHARE:
                        take([key], "nickname", round(share, 3), gram)
        return hits

    def _best(self, hits: list[tuple[str, str, float, Gram]]) -> list[EntityMatch]:
        """Keep each entity's best match, and no match inside a longer one ("Hamburg" in
        "Hamburg Marathon")."""
        spans = [(g.start, g.start + g.size) for _k, _s, _sc, g in hits]
        found: dict[str, EntityMatch] = {}
        for key, strategy, score, gram in hits:
            lo, hi = gram.start, gram.start + gram.size
            if any(a <= lo and hi <= b and (b - a) > (hi - lo) for a, b in spans):
                continue
            old = found.get(key)
            if old is None or (_RANK[strategy], -score) < (_RANK[old.strategy], -old.score):
                entity = self.entities[key]
                found[key] = EntityMatch(key, entity.name, entity.type, strategy, score, gram.text)
        return sorted(found.values(), key=lambda m: (_RANK[m.strategy], -m.score, m.key))


class IndexCache:
    """Each user's EntityIndex, kept per process while their entities version stands."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[str, EntityIndex]] = OrderedDict()

    def get(self, user: str, version: str) -> EntityIndex | None:
        """Return the cached index of this user at this version, if any."""
        with self._lock:
            item = self._items.get(user)
            if item is None or item[0] != version:
                return None
            self._items.move_to_end(user)
            return item[1]

    def put(self, user: str, version: str, index: EntityIndex) -> None:
        """Keep a user's index; the least recently used goes past `size`."""
        with self._lock:
            self._items[user] = (version, index)
            self._items.move_to_end(user)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


@dataclass(frozen=True)
class Recall:
    """What a message matched among the user's entities, and those entities."""

    matches: list[EntityMatch]
    entities: dict[str, Entity]


class EntityMatcher:
    """Match messages against each user's entities, loading an index only when they changed."""

    def __init__(self, store: EntityStore, threshold: float, cache: IndexCache | None = None) -> None:
        self.store = store
        self.threshold = threshold
        self.cache = cache or IndexCache()

    def index(self, user: str, version: str | None = None) -> EntityIndex:
        """Return the user's index at `version` (read from Redis when not given)."""
        version = self.store.version(user) if version is None else version
        if not version:  # no entity ever stored
            return EntityIndex(())
        index = self.cache.get(user, version)
        if index is None:
            index = EntityIndex(self.store.load(user).entities.values())
            self.cache.put(user, version, index)
        return index

    def recall(self, user: str, message: str, version: str | None = None) -> Recall:
        """Return the entities the message names; raise StoreUnavailable."""
        index = self.index(user, version)
        return Recall(index.match(message, self.threshold), index.entities)
