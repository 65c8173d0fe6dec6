"""Fact extraction without a model, for the stand-in (bot/dev/standin.py): regular
expressions over plain first-person statements in English, Portuguese and Spanish,
deterministic.

It lets `make run` remember "my name is Ana and I live in Porto", "chamo-me Rui e vivo em
Braga" or "me llamo Lucía y vivo en Sevilla" with no model at all: name, city, home town,
diet, allergies, family members and pets by name, job and employer, likes and dislikes. Keys
are English (`name`, `son_name`), values the user's own words. Only lines starting with
"User: " are read; Known facts and Assistant lines are ignored. Each user message is split
into sentences and clauses; every clause is matched against anchored first-person patterns,
so questions, hypotheticals, negations and statements about other people ("my sister lives
in Rome", "a minha irmã vive em Roma") yield nothing. A stand-in, not a model: a sentence
said another way is missed. No dependencies beyond ``re``.
"""
from __future__ import annotations

import re

_F = re.IGNORECASE

# Optional filler allowed at the start of a clause ("Hi", "well", "and", ...).
_LEAD = (r"^(?:(?:hi|hello|hey|well|also|and|so|oh|actually|btw|anyway|ok|okay"
         r"|yes|yeah|but|now|fyi|by\s+the\s+way"
         r"|olá|ola|oi|bom\s+dia|boa\s+tarde|boa\s+noite|então|entao|bem|também|tambem|e|mas|já|ja"
         r"|hola|buenos\s+días|buenos\s+dias|buenas\s+tardes|buenas\s+noches|bueno|pues|también|y|pero|sí|si"
         r")\b[\s,!¡]*)*")
_BE = r"i(?:'m|\s+am)\s+"
_ADV = r"(?:(?:really|also|absolutely|just|totally|truly|do)\s+)*"
_CAP = r"(?-i:(?!I\b)[A-ZÁÀÂÃÉÊÍÓÔÕÚÇÑÜ][\w'-]*)"  # capitalised word, never the pronoun "I"
_PLACE = rf"(?P<v>{_CAP}(?:\s+(?:(?:de|do|da|dos|das|del|de\s+la|de\s+los)\s+)?{_CAP})*)"
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

# Family members, by the key their name is kept under ({r}_name): English, Portuguese, Spanish.
_KIN = {"son": "son", "daughter": "daughter", "wife": "wife", "husband": "husband", "partner": "partner",
        "brother": "brother", "sister": "sister", "mother": "mother", "mom": "mother", "mum": "mother",
        "father": "father", "dad": "father", "boyfriend": "partner", "girlfriend": "partner",
        "filho": "son", "filha": "daughter", "mulher": "wife", "esposa": "wife", "marido": "husband",
        "namorado": "partner", "namorada": "partner", "irmão": "brother", "irmao": "brother", "irmã": "sister",
        "irma": "sister", "mãe": "mother", "mae": "mother", "pai": "father",
        "hijo": "son", "hija": "daughter", "mujer": "wife", "esposo": "husband",
        "novio": "partner", "novia": "partner", "hermano": "brother", "hermana": "sister", "madre": "mother",
        "mamá": "mother", "mama": "mother", "padre": "father", "papá": "father", "papa": "father"}
_EN_KIN = r"(?P<r>son|daughter|wife|husband|partner|brother|sister|mother|mom|mum|father|dad|boyfriend|girlfriend)"
_PT_KIN = (r"(?:o|a)\s+(?:meu|minha)\s+(?P<r>filho|filha|mulher|esposa|marido|namorado|namorada|irmão|irmao"
           r"|irmã|irma|mãe|mae|pai)")
_ES_KIN = r"mi\s+(?P<r>hijo|hija|mujer|esposa|esposo|marido|novio|novia|hermano|hermana|madre|mamá|mama|padre|papá|papa)"
_PT_DIETS = r"vegetarian[oa]|vegan[oa]|celíac[oa]|celiac[oa]|pescetarian[oa]"
_ES_DIETS = r"vegetarian[oa]|vegan[oa]|celíac[oa]|celiac[oa]|pescetarian[oa]"
_JOBS_PT_ES = (r"professor|professora|profesor|profesora|médico|médica|medico|medica|enfermeiro|enfermeira"
               r"|enfermero|enfermera|engenheiro|engenheira|ingeniero|ingeniera|advogado|advogada|abogado|abogada"
               r"|dentista|arquiteto|arquiteta|arquitecto|arquitecta|programador|programadora|estudante|estudiante"
               r"|cozinheiro|cozinheira|cocinero|cocinera|contabilista|contable|farmacêutico|farmacêutica"
               r"|farmacéutico|farmacéutica|designer|jornalista|periodista|vendedor|vendedora|motorista"
               r"|camionista|empregado de mesa|camarero|camarera|psicólogo|psicóloga|veterinário|veterinária|veterinario|veterinaria")
_PT_NAME = rf"(?!(?:vegetarian|vegan|celíac|alérgic|de|do|da|muito|bem)\w*\b)(?P<v>{_CAP}(?:\s+{_CAP})?)"
_PT_REST = r"(?P<v>.+?)(?=\s+(?:porque|quando|mas|embora)\b|\s*$)"
_ES_REST = r"(?P<v>.+?)(?=\s+(?:porque|cuando|pero|aunque)\b|\s*$)"
_PT_RULES = [
    ("allergies", "{v}", rf"(?:eu\s+)?sou\s+alérgic[oa]\s+(?:a|ao|à|aos|às)\s+{_PT_REST}", False),
    ("allergies", "{v}", rf"(?:eu\s+)?tenho\s+(?:uma\s+)?alergia\s+(?:a|ao|à|aos|às)\s+{_PT_REST}", False),
    ("diet", "no {v}", r"(?:eu\s+)?não\s+como\s+(?P<v>carne|peixe|marisco|lacticínios|laticínios|ovos|glúten)\b", True),
    ("diet", "{v}", rf"(?:eu\s+)?sou\s+(?P<v>{_PT_DIETS})\b", False),
    ("{r}_name", "{v}", rf"{_PT_KIN}\s+(?:chama-se|se\s+chama|é\s+(?:o|a))\s+{_PT_NAME}", False),
    ("{r}_name", "{v}", rf"(?:eu\s+)?tenho\s+(?:um|uma)\s+(?P<r>filho|filha)\s+(?:chamad[oa]|que\s+se\s+chama)\s+{_PT_NAME}", False),
    ("city", "{v}", rf"(?:eu\s+)?(?:vivo|moro|estou\s+a\s+viver|resido)\s+(?:em|no|na|nos|nas)\s+{_PLACE}", False),
    ("city", "{v}", rf"(?:eu\s+)?mudei-me\s+(?:para|pra)\s+(?:o\s+|a\s+)?{_PLACE}", False),
    ("hometown", "{v}", rf"(?:eu\s+)?(?:sou|venho)\s+(?:de|do|da)\s+{_PLACE}", False),
    ("occupation", "{v}", r"(?:eu\s+)?trabalho\s+como\s+(?P<v>[\w-]+(?:\s+[\w-]+)?)(?=\s+(?:em|no|na|num|numa)\b|\s*$)", False),
    ("employer", "{v}", rf"(?:eu\s+)?trabalho\s+(?:na|no|para\s+a|para\s+o)\s+{_PLACE}", False),
    ("occupation", "{v}", rf"(?:eu\s+)?sou\s+(?:um\s+|uma\s+)?(?P<v>{_JOBS_PT_ES})\b", False),
    ("likes", "{v}", rf"(?:eu\s+)?(?:gosto\s+(?:muito\s+)?(?:de|do|da|dos|das)|adoro)\s+{_PT_REST}", False),
    ("name", "{v}", rf"(?:eu\s+)?(?:chamo-me|me\s+chamo)\s+{_PT_NAME}", False),
    ("name", "{v}", rf"(?:o\s+)?meu\s+nome\s+é\s+{_PT_NAME}", False),
    ("name", "{v}", rf"(?:eu\s+)?sou\s+(?:o|a)\s+{_PT_NAME}", False),
]
_ES_RULES = [
    ("allergies", "{v}", rf"(?:yo\s+)?soy\s+alérgic[oa]\s+(?:a|al|a\s+la|a\s+los|a\s+las)\s+{_ES_REST}", False),
    ("allergies", "{v}", rf"(?:yo\s+)?tengo\s+(?:una\s+)?alergia\s+(?:a|al|a\s+la|a\s+los|a\s+las)\s+{_ES_REST}", False),
    ("diet", "no {v}", r"(?:yo\s+)?no\s+como\s+(?P<v>carne|pescado|marisco|lácteos|lacteos|huevos|gluten)\b", True),
    ("diet", "{v}", rf"(?:yo\s+)?soy\s+(?P<v>{_ES_DIETS})\b", False),
    ("{r}_name", "{v}", rf"{_ES_KIN}\s+se\s+llama\s+{_PT_NAME}", False),
    ("{r}_name", "{v}", rf"(?:yo\s+)?tengo\s+(?:un|una)\s+(?P<r>hijo|hija)\s+(?:llamad[oa]|que\s+se\s+llama)\s+{_PT_NAME}", False),
    ("city", "{v}", rf"(?:yo\s+)?(?:vivo|resido)\s+en\s+{_PLACE}", False),
    ("city", "{v}", rf"(?:yo\s+)?me\s+(?:he\s+)?mud(?:é|e|ado)\s+a\s+{_PLACE}", False),
    ("hometown", "{v}", rf"(?:yo\s+)?soy\s+de\s+{_PLACE}", False),
    ("occupation", "{v}", r"(?:yo\s+)?trabajo\s+(?:como|de)\s+(?P<v>[\w-]+(?:\s+[\w-]+)?)(?=\s+(?:en)\b|\s*$)", False),
    ("employer", "{v}", rf"(?:yo\s+)?trabajo\s+(?:en|para)\s+{_PLACE}", False),
    ("occupation", "{v}", rf"(?:yo\s+)?soy\s+(?:un\s+|una\s+)?(?P<v>{_JOBS_PT_ES})\b", False),
    ("likes", "{v}", rf"(?:a\s+mí\s+)?me\s+(?:gusta|gustan|encanta|encantan)\s+(?:mucho\s+)?{_ES_REST}", False),
    ("name", "{v}", rf"(?:yo\s+)?me\s+llamo\s+{_PT_NAME}", False),
    ("name", "{v}", rf"mi\s+nombre\s+es\s+{_PT_NAME}", False),
    ("name", "{v}", rf"(?:yo\s+)?soy\s+(?!de\b){_PT_NAME}", False),
]

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
        ("{r}_name", "{v}", rf"my\s+{_EN_KIN}(?:'s\s+name\s+is|\s+is\s+(?:called|named))\s+{_NAME}", False),
        ("{r}_name", "{v}", rf"i\s+have\s+an?\s+{_EN_KIN}\s+(?:called|named)\s+{_NAME}", False),
    ] + _PT_RULES + _ES_RULES
]

_REMEMBER = re.compile(r"^\s*(?:please\s+remember(?:\s+that)?|remember\s+that|lembra-te\s+(?:de\s+)?que"
                       r"|não\s+te\s+esqueças\s+(?:de\s+)?que|recuerda\s+que|no\s+olvides\s+que)\b[\s,:]*", _F)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n")
# A clause starts at "and/e/y" or a comma before a first-person word of any of the languages.
_CLAUSE_SPLIT = re.compile(
    r"(?:\s*,\s*(?:(?:and|but|plus|e|mas|y|pero)\s+)?|\s+(?:and|but|plus|e|mas|y|pero)\s+)"
    r"(?=(?:i|my|call|eu|o\s+meu|a\s+minha|sou|tenho|vivo|moro|chamo-me|gosto|adoro|trabalho|não|nao"
    r"|yo|mi|soy|tengo|me|trabajo|no)\b)", _F)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|wish|would|could|might|maybe|perhaps|imagine|suppose|pretend|someday"
    r"|hope|want\s+to|plan(?:ning)?\s+to|going\s+to)\b|'d\b"
    r"|(?:^|,\s*)(?:se|si)\s|\b(?:gostaria|talvez|quem\s+me\s+dera|quero\s+ser|vou\s+(?:viver|morar|mudar)"
    r"|ojalá|ojala|me\s+gustaría|quizás|quizá|tal\s+vez|quiero\s+ser|voy\s+a)\b", _F)
# Spanish "no" only before a verb: Portuguese "no" is "in the" ("moro no Porto").
_NEGATION = re.compile(r"n't\b|\b(?:not|never|no\s+longer|cannot|não|nao|nunca|jamais|nem|jamás|tampoco"
                       r"|no\s+(?:soy|vivo|tengo|me|trabajo|como|estoy|resido))\b", _F)
#: A leading article, left out of a value ("los frutos secos" is "frutos secos").
_ARTICLE = re.compile(r"^(?:el|la|los|las|o|a|os|as|the)\s+", _F)
_TRIM = " \t.,!?;:'\"()¿¡"

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
        if "r" in groups:  # a family member, kept under the English word ("filho" is "son")
            groups["r"] = _KIN.get(groups["r"].lower(), groups["r"].lower())
        key = re.sub(r"\W+", "_", key_tpl.format(**groups).lower())
        value = _ARTICLE.sub("", val_tpl.format(**groups).strip(_TRIM))
        if value:
            return key, value
    return None


def _message_facts(message: str) -> list[tuple[str, str]]:
    """Extract (key, value) pairs from one user message, in order."""
    found: list[tuple[str, str]] = []
    for sentence in _SENTENCE_SPLIT.split(message):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?") or "¿" in sentence or _HYPOTHETICAL.search(sentence):
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
