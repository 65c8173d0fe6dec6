"""Fact extraction without a model, for the stand-in (bot/dev/standin.py): regular
expressions over plain first-person English statements, deterministic.

It lets `make run` remember "my name is Ana and I live in Porto" with no model at all. Only lines starting with "User: " are read; Known facts and
Assistant lines are ignored. Each user message is split into sentences and
clauses; every clause is matched against anchored first-person patterns, so
questions, hypotheticals, negations and statements about other people
("my sister lives in Rome") yield nothing. No dependencies beyond ``re``.
"""
from __future__ import annotations

import re

_F = re.IGNORECASE

# Optional filler allowed at the start of a clause ("Hi", "well", "and", ...).
_LEAD = (r"^(?:(?:hi|hello|hey|well|also|and|so|oh|actually|btw|anyway|ok|okay"
         r"|yes|yeah|but|now|fyi|by\s+the\s+way)\b[\s,!]*)*")
_BE = r"i(?:'m|\s+am)\s+"
_ADV = r"(?:(?:really|also|absolutely|just|totally|truly|do)\s+)*"
_CAP = r"(?-i:(?!I\b)[A-Z][\w'-]*)"  # capitalised word, never the pronoun "I"
_PLACE = rf"(?P<v>{_CAP}(?:\s+{_CAP})*)"
_NOT_NAMES = (
    "fine|good|great|ok|okay|tired|happy|sad|sorry|here|back|allergic|vegan|vegetarian"
    "|not|so|very|just|also|really|married|single|busy|hungry|sick|ill|new|glad|sure"
    "|ready|done|excited|bored|well|going|trying|looking|working|living|based|from|in"
    "|at|into|american|british|english|french|german|italian|spanish|portuguese"
    "|brazilian|canadian|chinese|japanese|indian|mexican|irish")
_NAME = rf"(?!(?:{_NOT_NAMES})\b)(?P<v>{_CAP}(?:\s+{_CAP})?)"
_ANIMAL = (r"(?P<a>dog|cat|puppy|kitten|parrot|bird|rabbit|bunny|hamster|horse"
           r"|turtle|tortoise|snake|ferret|guinea\s+pig)")
_COUNT = r"(?:(?:an?|one|two|three|\d+)\s+)?"
_JOB = (r"(?!(?:bit|little|lot|big|huge|fan|great|good|bad|nice|person|mother|father"
        r"|mom|mum|dad|parent|guy|girl|man|woman)\b)"
        r"(?P<v>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)"
        r"(?=\s+(?:at|in|for|with|from|and)\b|\s*$)")
_REST = r"(?P<v>.+?)(?=\s+(?:because|since|when|but|though|although)\b|\s*$)"
_DIETS = (r"vegan|vegetarian|pescatarian|pescetarian|keto|paleo|gluten[- ]free"
          r"|lactose[- ]intolerant|halal|kosher")

# (key template, value template, pattern, allowed to contain a negation word).
# First matching pattern wins for a clause, so order matters.
_RULES: list[tuple[str, str, re.Pattern[str], bool]] = [
    (k, v, re.compile(_LEAD + p, _F), neg) for k, v, p, neg in [
        ("allergies", "{v}", rf"{_BE}(?:\w+ly\s+)?allergic\s+to\s+{_REST}", False),
        ("allergies", "{v}", r"i\s+have\s+(?:an?\s+|severe\s+|mild\s+)*"
                             r"(?P<v>[\w -]+?)\s+allerg(?:y|ies)\b", False),
        ("diet", "no {v}", r"i\s+(?:don't|do\s+not|never)\s+eat\s+(?P<v>meat|red\s+meat"
                           r"|pork|beef|fish|dairy|eggs|gluten|seafood|animal\s+products)\b", True),
        ("dislikes", "{v}", rf"i\s+{_ADV}(?:hate|dislike|detest|can't\s+stand|cannot\s+stand"
                            rf"|don't\s+like|do\s+not\s+like|don't\s+enjoy)\s+{_REST}", True),
        ("diet", "{v}", rf"{_BE}(?:an?\s+)?(?:strict\s+)?(?P<v>{_DIETS})\b", False),
        ("{a}_name", "{v}", rf"i\s+have\s+{_COUNT}{_ANIMAL}\s+(?:named|called)\s+{_NAME}", False),
        ("{a}_name", "{v}", rf"my\s+{_ANIMAL}(?:'s\s+name\s+is|\s+is(?:\s+(?:named|called))?)?"
                            rf"\s+{_NAME}", False),
        ("pets", "{a}", rf"i\s+have\s+{_COUNT}{_ANIMAL}s?\s*$", False),
        ("city", "{v}", rf"i(?:'m|\s+am)?\s+(?:(?:currently|now)\s+)?(?:live|living|reside"
                        rf"|residing|based)\s+in\s+{_PLACE}", False),
        ("city", "{v}", rf"i\s+(?:just\s+|recently\s+)?(?:moved|relocated)\s+to\s+{_PLACE}", False),
        ("hometown", "{v}", rf"(?:{_BE}(?:originally\s+)?from|i\s+(?:originally\s+)?come\s+from)"
                            rf"\s+{_PLACE}", False),
        ("employer", "{v}", rf"i\s+work\s+(?:at|for)\s+{_PLACE}", False),
        ("occupation", "{v}", rf"i\s+work\s+as\s+(?:an?\s+)?{_JOB}", False),
        ("occupation", "{v}", rf"{_BE}an?\s+{_JOB}", False),
        ("likes", "{v}", rf"(?:i\s+{_ADV}(?:love|like|enjoy|adore)|{_BE}{_ADV}into"
                         rf"|{_BE}(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of)\s+"
                         rf"(?!(?:you|it|that|this|them|him|her)\b){_REST}", False),
        ("name", "{v}", rf"my\s+name\s+is\s+(?!not\b)(?P<v>[a-z][\w'-]*(?:\s+{_CAP})?)", False),
        ("name", "{v}", rf"(?:call\s+me\s+|{_BE}){_NAME}", False),
    ]
]

_REMEMBER = re.compile(r"^\s*(?:please\s+remember(?:\s+that)?|remember\s+that)\b[\s,:]*", _F)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n")
_CLAUSE_SPLIT = re.compile(
    r"(?:\s*,\s*(?:(?:and|but|plus)\s+)?|\s+(?:and|but|plus)\s+)(?=(?:i|my|call)\b)", _F)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|wish|would|could|might|maybe|perhaps|imagine|suppose|pretend|someday"
    r"|hope|want\s+to|plan(?:ning)?\s+to|going\s+to)\b|'d\b", _F)
_NEGATION = re.compile(r"n't\b|\b(?:not|never|no\s+longer|cannot)\b", _F)
_TRIM = " \t.,!?;:'\"()"

_CATEGORY = {"name": "identity", "city": "location", "hometown": "location",
             "allergies": "health", "diet": "diet", "occupation": "work",
             "employer": "work", "pets": "family", "likes": "preference",
             "dislikes": "preference"}
_IMPORTANCE = {"name": 0.9, "allergies": 0.95, "city": 0.8, "hometown": 0.7,
               "diet": 0.8, "occupation": 0.7, "employer": 0.7, "pets": 0.6,
               "likes": 0.5, "dislikes": 0.5}
_JOINED = {"likes", "dislikes", "pets"}  # keys whose values accumulate


def _user_messages(request_text: str) -> list[str]:
    """Return the text of every "User: " line; all other lines are ignored."""
    return [line.strip()[len("User: "):] for line in request_text.splitlines()
            if line.strip().startswith("User: ")]


def _clause_facts(clause: str) -> tuple[str, str] | None:
    """Match one clause against the rules; return (key, value) or None."""
    for key_tpl, val_tpl, rule, negation_ok in _RULES:
        m = rule.match(clause)
        if not m or (not negation_ok and _NEGATION.search(m.group(0))):
            continue
        groups = {k: re.sub(r"\s+", " ", g) for k, g in m.groupdict().items() if g}
        key = re.sub(r"\W+", "_", key_tpl.format(**groups).lower())
        value = val_tpl.format(**groups).strip(_TRIM)
        if value:
            return key, value
    return None


def _message_facts(message: str) -> list[tuple[str, str]]:
    """Extract (key, value) pairs from one user message, in order."""
    found: list[tuple[str, str]] = []
    for sentence in _SENTENCE_SPLIT.split(message):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?") or _HYPOTHETICAL.search(sentence):
            continue
        for clause in _CLAUSE_SPLIT.split(sentence.strip(_TRIM)):
            fact = _clause_facts(clause.strip(_TRIM))
            if fact:
                found.append(fact)
    return found


def extract_request_facts(request_text: str) -> list[dict]:
    """Extract durable user facts from a fact-extraction request.

    Only "User: " lines are sources of facts. Returns one dict per key with
    keys key, value, category, confidence, importance, scope, explicit and
    temporal_stability (always "dynamic": every pattern is true until it changes).
    Later statements override earlier ones, except likes/dislikes/pets, whose
    values are joined with ", ". ``explicit`` is True when the message starts
    with "remember that" or "please remember".
    """
    facts: dict[str, dict] = {}
    for message in _user_messages(request_text.replace("\u2019", "'")):
        explicit = bool(_REMEMBER.match(message))
        message = _REMEMBER.sub("", message, count=1)
        for key, value in _message_facts(message):
            old, is_explicit = facts.get(key), explicit
            if key in _JOINED and old:
                parts = old["value"].split(", ")
                if value.lower() not in (p.lower() for p in parts):
                    value = ", ".join(parts + [value])
                else:
                    value = old["value"]
                is_explicit = explicit or old["explicit"]
            pet_name = key.endswith("_name") and key != "name"
            facts[key] = {
                "key": key,
                "value": value,
                "category": "family" if pet_name else _CATEGORY.get(key, "other"),
                "confidence": 0.9,
                "importance": 0.6 if pet_name else _IMPORTANCE.get(key, 0.5),
                "scope": "user",
                "explicit": is_explicit,
                "temporal_stability": "dynamic",
            }
    return list(facts.values())
