"""Entity extraction without a model, for the stand-in (bot/dev/standin.py): pass 2 of fact
extraction (prompts/extract_entities.md), regular expressions over the facts, deterministic.

Each run of capitalised words in a fact value ("Ana Silva", "University of Lisbon", "iPhone 15") is a
candidate, kept only when typed, first rule wins: by the words before it ("my dog Rex", "a cat named
Tom": PET; "my wife Ana", "Dr. Costa": PERSON; "works at Google": ORG; "speaks Portuguese": SKILL; "in
Lisbon", "moved to Berlin": PLACE; "and" or "," after a typed run: its type); else by a fact key naming
a kind (dog_name, pet: PET; partner, sister, boss: PERSON; city: PLACE; employer, school: ORG; car,
phone: PRODUCT; project; language(s): SKILL), but not "at/for X" under a person key; else as a known
entity. Left out: untyped runs (no CONCEPT guesses), common capitalised words, I, titles, unnamed
relatives and animals, weekdays, months, nationalities, languages (but as SKILL), numbers and the user
(the `name` fact). A first name of a known entity ("Ana" for "Ana Silva (PERSON)"), or of exactly one
other entity of its type, becomes the full name, the short form an alias.
"""
from __future__ import annotations

import json
import re
import unicodedata

#: The Structured Outputs schema name of entity extraction; the stand-in dispatches on it.
ENTITY_SCHEMA_NAME = "user_entities"
TYPES = frozenset("PERSON PET PLACE ORG PRODUCT PROJECT EVENT SYSTEM TOOL SKILL FILE CONCEPT".split())

_F = re.IGNORECASE
_ANIMALS = "dog cat puppy kitten parrot bird rabbit bunny hamster horse turtle tortoise snake ferret pet"
_RELATIONS = ("partner wife husband spouse girlfriend boyfriend fiance fiancee sister brother sibling mother mom"
              " mum father dad parent son daughter child children kid baby friend boss manager colleague coworker"
              " doctor dentist therapist teacher grandmother grandfather grandma grandpa aunt uncle cousin niece"
              " nephew roommate flatmate neighbor neighbour")
_KEY_TYPES = {  # the words a fact key may be made of to name a type ("home_city": PLACE)
    "PET": {w + s for w in _ANIMALS.split() for s in ("", "s")},
    "PERSON": {w + s for w in _RELATIONS.split() for s in ("", "s")} | {"contact"},
    "PLACE": set("city country hometown town home location address street neighborhood region state".split()),
    "ORG": set("employer company school university college gym team club workplace clinic hospital".split()),
    "PRODUCT": set("car phone laptop computer bike watch console camera tablet".split()),
    "PROJECT": {"project", "projects"},
    "SKILL": {"language", "languages", "tongue", "skill", "skills"},
    "EVENT": {"event", "events", "wedding", "marathon"},
}
_KEY_MODIFIERS = set("name names nickname full last favorite favourite fav best current main first second new"
                     " old older younger little big previous former primary native side emergency work my".split())
_JOB_KEYS = {"occupation", "job", "work", "role", "position", "title", "career"}
_LANGUAGES = set("english portuguese spanish french german italian dutch chinese mandarin cantonese japanese"
                 " korean russian arabic hindi greek polish swedish norwegian danish finnish turkish hebrew"
                 " ukrainian czech catalan romanian hungarian vietnamese thai indonesian urdu latin farsi".split())
_STOP = set(  # capitalised words that are never (part of) a name; relatives and animals too
    "i i'm i've i'd i'll me my mine we our you your he him his she her they them their it its the a an this"
    " that these those and or but so also just only very really now then currently recently usually always"
    " never not no yes ok okay hi hello is was are were be has have had works work worked working lives live"
    " lived living loves love likes like enjoys named called both some all every each at in on from for with"
    " to of by about near since after before who which when where what user assistant unknown none storage"
    " dr mr mrs ms miss prof sir sr sra dra today tomorrow yesterday morning evening night weekend monday"
    " tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun january february march"
    " april may june july august september october november december jan feb mar apr jun jul aug sep sept"
    " oct nov dec american british brazilian canadian indian mexican irish scottish welsh australian"
    " argentinian colombian african european asian latino latina".split()) | _KEY_TYPES["PET"] | _KEY_TYPES["PERSON"]
_CONNECTORS = {"of", "de", "da", "do", "dos", "das", "del", "della", "di", "du", "van", "von", "der", "den"}
_TOKEN = re.compile(r"[^\W_](?:\w|['’-](?=[^\W_]))*")
_NAMED = r"s?(?:'s\s+name\s+is|\s+(?:is\s+)?(?:named|called)|\s+is)?[\s,:]*"
_DET = r"(?:\b(?:my|our|his|her|their|a|an|the)\s+)?(?:[\w'-]+\s+)?\b"
_TITLE = r"\b(?:dr|mr|mrs|ms|miss|prof|sra?|dra)\.?\s+"
_NOT_PLACE = "interested|fluent|skilled|degree|major\\w*|phd|masters?|course|class|expert|experience|proficient|coded"
_CONTEXTS = [  # (type, confidence, pattern over the text before a run); evidence starts at group 1 or 0
    ("PET", 0.9, re.compile(rf"{_DET}(?:{'|'.join(_ANIMALS.split())}|guinea\s+pig){_NAMED}$", _F)),
    ("PERSON", 0.9, re.compile(rf"(?:{_DET}(?:{'|'.join(_RELATIONS.split())}){_NAMED}"
                               rf"|\b(?:married\s+to|engaged\s+to|dating)\s+)(?:{_TITLE})?$", _F)),
    ("PERSON", 0.85, re.compile(rf"{_TITLE}$", _F)),
    ("ORG", 0.9, re.compile(r"\b(?:work(?:s|ed|ing)?|employed|job|intern(?:s|ed|ing)?|stud(?:y|ies|ied|ying)"
                            r"|teach(?:es|ing)?|taught|volunteer(?:s|ed|ing)?|enrolled)\b"
                            r"(?:\s+[\w'-]+){0,4}?\s+(?:at|for|by)\s+(?:the\s+)?$", _F)),
    ("SKILL", 0.85, re.compile(r"\b(?:speak(?:s|ing)?|spoke|learn(?:s|ed|t|ing)?|fluent\s+in|native"
                               r"|stud(?:y|ies|ied|ying))\s+$", _F)),
    ("PLACE", 0.8, re.compile(r"\b(?:mov\w*|relocat\w*|travel\w*|going|went|fl(?:y|ying|ew)|back|trip)"
                              r"\s+to\s+(?:the\s+)?$", _F)),
    ("PLACE", 0.8, re.compile(rf"(?:^|[^\w\s]\s*|\b(?!(?:{_NOT_PLACE})\b)[\w']+\s+)(in|from|near)\s+(?:the\s+)?$", _F)),
]
_AT = re.compile(r"\b(?:at|for|by)\s+(?:the\s+)?$", _F)
_JOINER = re.compile(r"^\s*(?:,|&|and|,\s*and)\s*$", _F)
_KNOWN_LINE = re.compile(r"^-\s*(?P<name>.+?)\s*\((?P<type>[A-Za-z]+)\)\s*(?:,\s*also:\s*(?P<aliases>.*))?$")
_FACT_LINE = re.compile(r"^-\s*\[(?P<key>[^\]]*)\]\s*(?P<value>.*)$")
_TRIM = " \t.,!?;:'\"()"
Known = tuple[str, str, list[str]]  # name, type, aliases
Token = tuple[int, int, str]  # start, end, kind: name, conn, model or lang


def _fold(text: str) -> str:
    """Case- and accent-insensitive form of a name, for comparisons."""
    text = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in text if not unicodedata.combining(c)).casefold().split())


def _parse(text: str) -> tuple[list[Known], list[tuple[str, str]]]:
    """Read the known entities and the (key, value) facts; malformed lines are skipped."""
    known: list[Known] = []
    facts: list[tuple[str, str]] = []
    section = ""
    for line in (raw.strip() for raw in text.splitlines()):
        if line.lower() in ("known entities:", "facts:"):
            section = line.lower()
        elif section == "known entities:" and (m := _KNOWN_LINE.match(line)) and (t := m["type"].upper()) in TYPES:
            known.append((m["name"], t, [a.strip() for a in (m["aliases"] or "").split(",") if a.strip()]))
        elif section == "facts:" and (m := _FACT_LINE.match(line)):
            try:
                value = json.loads(m["value"])
            except (ValueError, RecursionError):
                continue
            key = re.sub(r"\W+", "_", m["key"].strip().lower()).strip("_")
            if key and isinstance(value, str) and value.strip():
                facts.append((key, unicodedata.normalize("NFC", value)))
    return known, facts


def _key_type(key: str) -> str | None:
    """The type a fact key names ("dog_name": PET), "USER" for the user's own name, or None."""
    tokens = [t for t in key.replace("mother_tongue", "language").split("_") if t]
    rest = {t for t in tokens if t not in _KEY_MODIFIERS}
    if not rest:
        return "USER" if {"name", "nickname"} & set(tokens) else None
    return next((t for t, words in _KEY_TYPES.items() if rest <= words), None)


def _kind(word: str) -> str:
    """Classify one word: name, conn(ector), model (has a digit), lang(uage) or other."""
    folded = _fold(word)
    return ("lang" if folded in _LANGUAGES and word[0].isupper() else "model" if any(c.isdigit() for c in word)
            else "conn" if folded in _CONNECTORS and word.islower()
            else "name" if any(c.isupper() for c in word) and folded not in _STOP else "other")


def _runs(value: str) -> list[list[Token]]:
    """Split a value into runs of capitalised words joined by single spaces (a language: alone)."""
    runs: list[list[Token]] = [[]]
    for m in _TOKEN.finditer(value):
        start, end = m.span()
        end -= 2 if re.search(r"['’]s$", m[0]) else 0  # possessive: "Ana's" is Ana, and the run ends
        kind, cur = _kind(value[start:end]), runs[-1]
        joined = bool(cur) and "lang" not in (kind, cur[-1][2]) and value[cur[-1][1]:start].isspace()
        if kind in ("name", "lang") or (joined and kind in ("conn", "model")):
            if not joined:
                runs.append([])
            runs[-1].append((start, end, kind))
        elif cur:
            runs.append([])
    return [r for r in (_trim(r, ("conn",)) for r in runs) if r]


def _trim(run: list[Token], kinds: tuple[str, ...]) -> list[Token]:
    """Drop trailing tokens of the given kinds."""
    return run[:max((i + 1 for i, t in enumerate(run) if t[2] not in kinds), default=0)]


def _context(value: str, start: int, key: str, key_type: str | None) -> tuple[str | None, float, int]:
    """Type, confidence and evidence start from the words before value[start] ("" type: left out)."""
    offset = max(0, start - 80)  # the patterns look a few words back; the window keeps long values fast
    before = value[offset:start]
    for etype, conf, pattern in _CONTEXTS:
        if m := pattern.search(before):
            return etype, conf, offset + m.start(m.lastindex or 0)
    if (m := _AT.search(before)) and key_type not in ("ORG", "PLACE"):
        return ("ORG", 0.8, offset + m.start()) if key in _JOB_KEYS else ("", 0.0, 0)
    return None, 0.0, 0


def _fact_mentions(key: str, value: str) -> list[tuple[str, str | None, float, str]]:
    """(name, type, confidence, evidence) of each candidate, typed by context, else key, else None."""
    key_type, found = _key_type(key), []
    prev: tuple[int, str | None, float] = (-1, None, 0.0)  # end, type, confidence of the last kept run
    for run in _runs(value):
        start, lang = run[0][0], run[0][2] == "lang"
        etype, conf, ev_start = _context(value, start, key, key_type)
        if etype is None and prev[1] and _JOINER.match(value[prev[0]:start]):
            etype, conf, ev_start = prev[1], prev[2], start
        if etype is None and key_type:
            etype, ev_start = key_type, start
            conf = 0.9 if value.strip(_TRIM) == value[start:run[-1][1]] else 0.75
        if etype == "" or (lang and etype != "SKILL"):
            continue
        end = _trim(run, ("conn",) if etype == "PRODUCT" else ("conn", "model"))[-1][1]
        name = " ".join(value[start:end].split())
        found.append((name, etype, conf, " ".join(value[ev_start:end].split()) if etype else name))
        prev = (end, etype, conf)
    return found


def _resolve(name: str, known: list[Known]) -> tuple[Known | None, str]:
    """The known entity a found name refers to (name, alias or unique first name) and a note."""
    folded = _fold(name)
    for entry in known:
        if folded == _fold(entry[0]):
            return entry, "" if name == entry[0] else f'spelled as the known entity "{entry[0]}"'
        if any(folded == _fold(a) for a in entry[2]):
            return entry, f'"{name}" is a known alias of "{entry[0]}"'
    firsts = [e for e in known if len(e[0].split()) > 1 and _fold(e[0].split()[0]) == folded]
    if len(firsts) == 1 and len(name.split()) == 1:
        return firsts[0], f'expanded "{name}" to the known entity "{firsts[0][0]}"'
    return None, ""


def _merge(into: dict, other: dict) -> None:
    """Fold one collected entity into another (aliases, facts, notes, best confidence)."""
    for field in ("aliases", "facts", "notes"):
        into[field] += other[field]
    into["order"] = min(into["order"], other["order"])
    if other["confidence"] > into["confidence"]:
        into.update(type=other["type"], confidence=other["confidence"], evidence=other["evidence"])


def _unique(items: list[str], exclude: str = "") -> list[str]:
    """Items in first-seen order without case/accent duplicates or ``exclude``."""
    seen = {_fold(exclude)}
    return [i for i in items if not (_fold(i) in seen or seen.add(_fold(i)))]


def extract_request_entities(text: str) -> list[dict]:
    """Find the named entities in the facts of an entity-extraction request.

    Returns one dict per distinct entity, in first-mention order: name, type, aliases, facts (keys of
    the facts that mention it, in request order), confidence, evidence and normalization_notes.
    Never raises on a malformed request: it yields [].
    """
    if not isinstance(text, str):
        return []
    known, facts = _parse(text)
    users = {_fold(v.strip(_TRIM)) for k, v in facts if _key_type(k) == "USER"}
    mentions = [(k, m) for k, v in facts if _key_type(k) != "USER" for m in _fact_mentions(k, v)]
    found: dict[str, dict] = {}
    for key, (name, etype, conf, evidence) in mentions:
        entry, note = _resolve(name, known)
        if entry is None and not etype:
            continue
        canonical = entry[0] if entry else name
        aliases = (entry[2] if entry else []) + ([name] if _fold(name) != _fold(canonical) else [])
        item = {"name": canonical, "type": entry[1] if entry else etype, "aliases": aliases, "facts": [key],
                "confidence": 0.95 if entry else conf, "evidence": evidence, "notes": [note] if note else [],
                "order": len(found), "known": bool(entry)}
        if (into := found.setdefault(_fold(canonical), item)) is not item:
            _merge(into, item)
    for folded, item in list(found.items()):  # "Ana" and "Ana Silva" in the same request
        fuller = [o for o in found.values() if o is not item and o["type"] == item["type"]
                  and len(o["name"].split()) > 1 and _fold(o["name"].split()[0]) == folded]
        if not item["known"] and len(item["name"].split()) == 1 and len(fuller) == 1:
            item["aliases"].append(item["name"])
            item["notes"].append(f'expanded "{item["name"]}" to "{fuller[0]["name"]}" from another fact')
            _merge(fuller[0], item)
            del found[folded]
    return [{"name": e["name"], "type": e["type"], "aliases": _unique(e["aliases"], e["name"]),
             "facts": sorted(_unique(e["facts"]), key=[k for k, _ in facts].index), "confidence": e["confidence"],
             "evidence": e["evidence"], "normalization_notes": "; ".join(_unique(e["notes"]))}
            for e in sorted(found.values(), key=lambda e: e["order"]) if _fold(e["name"]) not in users]
