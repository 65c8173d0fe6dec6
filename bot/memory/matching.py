"""Message-time entity matching (design note 3), with no model call: which of the user's
known entities does this message name?

Runs of 1..4 words of the message are compared with every name and alias, in three levels;
each match carries its level and score:
1. exact: the words as written equal a name ("Rex");
2. normalized: equal once case, accents, punctuation and a possessive are set aside ("rex's",
   "SÃO PAULO"); a plural counts for things that take one ("my Kindles");
3. fuzzy: rapidfuzz's ratio >= ENTITY_FUZZY_THRESHOLD against names of the same number of
   words and the same first letter ("Lisbn", "Rexy"), over words not matched already.

Common words a name may also be ("apple", "rocky") match only when written with a capital.
An index is built once per user and entities version, and kept per process (IndexCache).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable

from rapidfuzz import fuzz, process

from bot.memory.names import PLURAL_TYPES, comparable, singular_forms, word_grams
from bot.storage.entities import Entity, EntityStore

#: Longest name, in words, looked for in a message.
MAX_NAME_WORDS = 4
#: Names shorter than this are never matched fuzzily: too many near neighbours.
MIN_FUZZY_CHARS = 3
#: Ordinary words that are also names people give things: such a name, written in lower
#: case in the message, is the word, not the entity ("an apple a day", "a rocky road").
COMMON_WORDS = frozenset(
    "apple amazon orange java python ruby rose lily daisy ivy jasmine violet iris pearl ruby amber "
    "rocky lucky buddy max bella coco cookie pepper ginger honey sugar candy biscuit peanut "
    "shadow smokey tiger bear duke prince princess king queen angel hope faith grace joy "
    "summer autumn winter spring april may june august sky rain storm river ocean star sunny "
    "bill will mark rich frank jack pat sue ray rob dick chase hunter "
    "mercury jordan georgia chelsea florence paris victoria "
    "target shell oracle slack notion zoom teams office word excel signal "
    "bean bolt chip dot echo flash ghost jazz ace blue red"
    .split()
)


@dataclass(frozen=True)
class EntityMatch:
    """One known entity a message names."""

    key: str
    name: str
    type: str
    strategy: str  # exact, normalized or fuzzy
    score: float  # 1.0 for exact and normalized, the ratio for fuzzy
    text: str  # the message's words that matched

    def to_public(self) -> dict[str, Any]:
        """Return the match as the admin API and the CLI show it."""
        return {"key": self.key, "name": self.name, "type": self.type, "strategy": self.strategy,
                "score": round(self.score, 3), "text": self.text}

    def explain(self) -> str:
        """Return why it matched, for a person: "entity Rex, fuzzy 0.91"."""
        how = self.strategy if self.strategy != "fuzzy" else f"fuzzy {self.score:.2f}"
        return f"entity {self.name}, {how}"


_RANK = {"exact": 0, "normalized": 1, "fuzzy": 2}


class EntityIndex:
    """A user's entity names, arranged for matching."""

    def __init__(self, entities: Iterable[Entity]) -> None:
        self.entities = {e.key: e for e in entities}
        self.exact: dict[str, set[str]] = {}
        self.normal: dict[str, set[str]] = {}
        self.fuzzy: dict[tuple[int, str], list[tuple[str, str]]] = {}  # (words, initial) -> [(name, key)]
        self.max_words = 1
        for key, entity in self.entities.items():
            for name in entity.names():
                norm = comparable(name)
                if not norm:
                    continue
                size = min(len(norm.split()), MAX_NAME_WORDS)
                self.max_words = max(self.max_words, size)
                self.exact.setdefault(" ".join(name.split()), set()).add(key)
                self.normal.setdefault(norm, set()).add(key)
                if len(norm) >= MIN_FUZZY_CHARS:
                    self.fuzzy.setdefault((size, norm[0]), []).append((norm, key))

    def _hit(self, found: dict[str, EntityMatch], key: str, strategy: str, score: float, text: str) -> None:
        entity = self.entities[key]
        old = found.get(key)
        if old is None or (_RANK[strategy], -score) < (_RANK[old.strategy], -old.score):
            found[key] = EntityMatch(key, entity.name, entity.type, strategy, score, text)

    def match(self, message: str, threshold: float) -> list[EntityMatch]:
        """Return the known entities the message names, best first (level, then score)."""
        if not self.entities or not message:
            return []
        found: dict[str, EntityMatch] = {}
        matched_words: set[int] = set()
        grams = word_grams(message, self.max_words)
        for gram in grams:
            span = range(gram.start, gram.start + gram.size)
            common = gram.size == 1 and gram.text.islower() and gram.norm in COMMON_WORDS
            keys = self.exact.get(gram.text)
            if keys:
                for key in keys:
                    self._hit(found, key, "exact", 1.0, gram.text)
                matched_words.update(span)
                continue
            if common:
                continue
            keys = set(self.normal.get(gram.norm, ()))
            for singular in singular_forms(gram.norm):
                keys |= {k for k in self.normal.get(singular, ()) if self.entities[k].type in PLURAL_TYPES}
            for key in keys:
                self._hit(found, key, "normalized", 1.0, gram.text)
            if keys:
                matched_words.update(span)
        cutoff = threshold * 100
        for gram in grams:
            if len(gram.norm) < MIN_FUZZY_CHARS or matched_words.intersection(range(gram.start, gram.start + gram.size)):
                continue
            if gram.size == 1 and gram.text.islower() and gram.norm in COMMON_WORDS:
                continue
            choices = self.fuzzy.get((gram.size, gram.norm[0]))
            if not choices:
                continue
            names = [name for name, _ in choices]
            for _name, score, at in process.extract(gram.norm, names, scorer=fuzz.ratio, score_cutoff=cutoff, limit=3):
                self._hit(found, choices[at][1], "fuzzy", score / 100, gram.text)
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
