"""Task extraction without a model, for the stand-in (bot/dev/standin.py): regular expressions over
the new message of a task-extraction request, deterministic.

It decides whether the new message can be answered alone or needs the chat history (a summary or
recent messages) and/or the user's memory (facts and entities), and restates it as one sentence.
History is needed when there is some and the message leans on it: pronouns and demonstratives ("it",
"that", "the other one"), follow-up openers ("and ...", "what about", "instead", "again"),
comparatives ("cheaper", "than") or a very short message (three words or fewer) that is not a
greeting or thanks. Memory is needed when the message is personal: first-person pronouns and
possessives ("my", "me", "should I", "our"), recommendation verbs ("recommend", "suggest"), a known
entity's name (or its first word) or a word of a known fact key ("dog" for dog_name). Each cue also
has Portuguese, Spanish, French and German equivalents; matching is case- and accent-insensitive.
In doubt the answer is "history needed": dropping needed history is the dangerous error. A
malformed request never raises: it gets the safe fallback (both needed, no task, no entities).
"""
from __future__ import annotations

import json
import re
import unicodedata

#: The Structured Outputs schema name of task extraction; the stand-in dispatches on it.
TASK_SCHEMA_NAME = "user_task"

_REQUEST = re.compile(
    r"\A(?:Documents' languages:(?P<documents>[^\n]*)\n\s*)?Known fact keys:(?P<keys>[^\n]*)\n\s*Known entities:(?P<entities>[^\n]*)\n\s*Summary:(?P<summary>.*?)"
    r"\n\s*Recent messages:(?P<recent>.*?)\n\s*New message:(?P<new>.*)\Z", re.S)
_ENTITY = re.compile(r"\s*(?P<name>[^,()]+?)\s*\((?P<type>[A-Za-z_]+)\)\s*(?:,|$)")
_SPEAKER = re.compile(r"^(?P<who>user|assistant)\s*:\s*(?P<text>.*)$", re.I)
_NONE = "(none)"


def _words(*phrases: str) -> str:
    """An alternation of whole words or phrases ("a|b c"), for the folded text."""
    return r"\b(?:" + "|".join(phrases) + r")\b"


# Whole messages that are only greetings, thanks or goodbyes: neither history nor memory.
_SOCIAL_PHRASE = (r"(?:(?:hi|hello|hey|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening|night)"
                  r"|bye|goodbye|bye\s+bye|see\s+you(?:\s+later|\s+soon)?|thanks|thank\s+you|thx|ty|cheers"
                  r"|many\s+thanks|much\s+appreciated|(?:i\s+)?appreciate\s+it|ola|oi|bom\s+dia|boa\s+tarde"
                  r"|boa\s+noite|obrigad[oa]|muito\s+obrigad[oa]|valeu|tchau|ate\s+logo|hola|buen(?:o|a)s"
                  r"(?:\s+(?:dias|tardes|noches))?|gracias|muchas\s+gracias|adios|hasta\s+luego|chao|bonjour"
                  r"|bonsoir|salut|coucou|merci(?:\s+beaucoup)?|au\s+revoir|hallo|guten\s+(?:morgen|tag|abend)"
                  r"|gute\s+nacht|danke(?:\s+(?:schon|sehr))?|vielen\s+dank|tschuss|servus|moin)"
                  r"(?:\s+(?:there|all|everyone|again|so\s+much|very\s+much|a\s+lot|bot|guys|mate))*)")
_SOCIAL = re.compile(rf"^\s*(?:{_SOCIAL_PHRASE}(?:\s+|$))+$")

# History cues: references, follow-up openers and comparatives, in English, pt, es, fr, de.
_REFERENCE = re.compile(_words(
    "it|its|that|this|those|these|them|they|their|he|him|his|she|her|there|the same|the other|the rest"
    "|the (?:first|second|third|last|previous|next|latter|former|other|same|cheaper|better) ones?|which one"
    "|the above|same one|another one",
    "isso|isto|aquilo|esse|essa|esses|essas|este|esta|estes|estas|aquele|aquela|ele|ela|eles|elas|dele|dela"
    "|ali|o mesmo|a mesma|o outro|a outra|o primeiro|a primeira|o ultimo|a ultima",
    "eso|esto|esa|ese|esos|esas|aquello|ella|ellos|ellas|alli|alla|ahi|lo mismo|el mismo|la misma|el otro"
    "|la otra|el primero|el ultimo|la ultima",
    "ca|cela|ceci|celui|celle|ceux|celles|il|elle|ils|elles|le meme|la meme|l'autre|le premier|le dernier",
    "das|dies|dieses|diese|es|er|sie|ihn|ihm|dort|dasselbe|derselbe|dieselbe|der andere|die andere"
    "|der erste|der letzte"))
_OPENER = re.compile(r"^[\s¿¡]*(?:ok(?:ay)?\s*,?\s*)?" + _words(
    "and|but|or|so|then|what if|e|mas|ou|entao|e se|y|pero|entonces|y si|et|mais|alors|et si|und|aber"
    "|oder|dann|also"))
_FOLLOW_UP = re.compile(_words(
    "what about|how about|also|then|compare|compared|comparison|instead|more|less|shorter|longer|again"
    "|too|as well|else|another|other|continue|go on|the rest",
    "que tal|e quanto|tambem|entao|depois|compara|comparar|comparado|em vez|ao inves|mais|menos"
    "|de novo|novamente|outra vez|mais curto|mais longo|outro|outra",
    "y que|tambien|entonces|luego|comparar|comparado|en vez|en lugar|mas|menos|otra vez|de nuevo"
    "|mas corto|mas largo|otro",
    "et pour|quoi de|aussi|alors|ensuite|comparer|compare|au lieu|plus|moins|encore|de nouveau"
    "|plus court|plus long|autre",
    "was ist mit|wie ware es|auch|dann|vergleich|vergleichen|stattdessen|mehr|weniger|nochmal"
    "|noch einmal|wieder|kurzer|langer|andere"))
_COMPARATIVE = re.compile(_words(
    "better|worse|cheaper|pricier|faster|slower|bigger|smaller|than|vs|versus|similar|different"
    "|melhor|pior|mais barato|do que|mejor|peor|mas barato|que el|meilleur|mieux|pire|moins cher"
    "|besser|schlechter|billiger|als"))

# Memory cues: first-person pronouns and possessives, recommendation verbs.
_PERSONAL = re.compile(_words(
    "my|mine|myself|me|our|ours|ourselves|we|we're|we've|where i live",
    r"(?:should|shall|can|could|do|would|will|must|may|might|am|have) i"
    r"|i(?:'m|'d|'ll|'ve| (?:should|need|want|have|am|live|like|love|can|could|must|would|will|plan|prefer"
    r"|usually|normally|always|never|eat|own))",
    "meu|minha|meus|minhas|mim|comigo|nosso|nossa|nossos|nossas|eu|devo|posso",
    "mi|mis|mio|mia|mios|mias|conmigo|nuestro|nuestra|nuestros|nuestras|yo|debo|deberia|puedo",
    "mon|ma|mes|moi|je|j'\\w*|nous|notre|nos|dois-je|devrais-je|puis-je",
    r"mein\w*|mich|mir|ich|wir|uns|unser\w*"))
_RECOMMEND = re.compile(r"\b(?:recommend|recomend|recomiend|sugg|sugest|suger|sugier|conseil|empf[ae]hl"
                        r"|vorschlag|vorschlagen|advice|advise|ideas? for)\w*")
_FIRST_STOP = set("the a an my our mr mrs ms dr st san santa new le la les el los o os de da do du von van".split())
_KEY_STOP = set("name names nickname full first last favorite favourite fav current main other is has".split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SAFE = {"task": "", "search": "", "depends_on_chat_history": True, "depends_on_user_memory": True, "entities": []}


def _fold(text: str) -> str:
    """Case- and accent-insensitive form of a text, curly apostrophes straightened, spaces collapsed."""
    text = unicodedata.normalize("NFKD", text.replace("\u2019", "'"))
    return " ".join("".join(c for c in text if not unicodedata.combining(c)).casefold().split())


def _value(raw: str) -> str:
    """A section's value, "" for "(none)"."""
    value = raw.strip()
    return "" if value == _NONE else value


def _unquote(value: str) -> str:
    """A text as the app writes it: a JSON string literal (bot/llm/fence.py inert), decoded."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
            return decoded if isinstance(decoded, str) else value
        except ValueError:
            return value
    return value


def _parse(text: str) -> tuple[list[str], list[tuple[str, str]], str, list[tuple[str, str]], str, bool] | None:
    """Known fact keys, known entities, summary, recent (speaker, text), new message and
    whether the business has documents (their languages named); None if malformed."""
    m = _REQUEST.match(text.replace("\r\n", "\n").strip())
    if not m or not (new := " ".join(_unquote(m["new"]).split())):
        return None
    keys = [k.strip() for k in _value(m["keys"]).split(",") if k.strip()]
    entities = [(e["name"], e["type"].upper()) for e in _ENTITY.finditer(_value(m["entities"]))]
    recent: list[tuple[str, str]] = []
    for line in (raw.strip() for raw in _value(m["recent"]).splitlines()):
        if (s := _SPEAKER.match(line)) and s["text"].strip():
            recent.append((s["who"].lower(), _unquote(s["text"])))
        elif line and recent:  # continuation of a multi-line message
            recent[-1] = (recent[-1][0], f"{recent[-1][1]} {line}")
        elif line:
            recent.append(("", line))
    documents = any(lang.strip() for lang in (m["documents"] or "").split(","))
    return keys, entities, " ".join(_unquote(_value(m["summary"])).split()), recent, new, documents


def _named_entities(folded: str, entities: list[tuple[str, str]]) -> list[dict]:
    """The known entities the message names (full name or first word), in order of appearance."""
    found: list[tuple[int, int, dict]] = []
    for index, (name, etype) in enumerate(entities):
        forms = [_fold(name)]
        first = forms[0].split()[0] if forms[0] else ""
        if len(forms[0].split()) > 1 and len(first) > 1 and first not in _FIRST_STOP:
            forms.append(first)
        hits = [m.start() for f in forms if f for m in re.finditer(rf"(?<!\w){re.escape(f)}(?!\w)", folded)]
        if hits:
            found.append((min(hits), index, {"name": name, "type": etype}))
    return [entry for _, _, entry in sorted(found, key=lambda f: f[:2])]


def _mentions_key(folded: str, keys: list[str]) -> bool:
    """Whether the message says a word of a known fact key ("dog" for dog_name, "allergy" for allergies)."""
    for key in keys:
        for word in re.split(r"[\W_]+", _fold(key)):
            if len(word) < 3 or word in _KEY_STOP:
                continue
            singular = word[:-3] + "y" if word.endswith("ies") else word[:-1] if re.search(r"[^s]s$", word) else word
            if re.search(rf"\b(?:{re.escape(word)}|{re.escape(singular)})(?:s|es)?\b", folded):
                return True
    return False


def _needs_history(folded: str) -> bool:
    """Whether the message leans on earlier turns (references, ellipsis, follow-ups, comparisons)."""
    return (len(re.findall(r"\w+", folded)) <= 3 or any(
        p.search(folded) for p in (_REFERENCE, _OPENER, _FOLLOW_UP, _COMPARATIVE)))


def _antecedent(summary: str, recent: list[tuple[str, str]]) -> str:
    """What the message follows: the last user message, else the summary's first sentence, else the last line."""
    users = [text for who, text in recent if who == "user"]
    if users:
        return users[-1]
    if summary:
        return _SENTENCE.split(summary, maxsplit=1)[0]
    return recent[-1][1] if recent else ""


def extract_request_task(text: str) -> dict:
    """Restate the new message of a task-extraction request and say what answering it depends on.

    Returns task (the message, prefixed with `Following up on "<antecedent>": ` when it needs
    history), search (the task, when the business has documents and the message is not small
    talk; "" otherwise), depends_on_chat_history, depends_on_user_memory and entities (the known entities it
    names, as {"name", "type"}, in order of appearance). Greetings and thanks need neither; with
    no history, history is never needed. Never raises: a malformed request gets the safe fallback.
    """
    try:
        parsed = _parse(text) if isinstance(text, str) else None
        if parsed is None:
            return json.loads(json.dumps(_SAFE))
        keys, entities, summary, recent, new, documents = parsed
        folded = _fold(new)
        social = bool(_SOCIAL.match(re.sub(r"[^\w\s']", " ", folded)))
        named = _named_entities(folded, entities)
        history = bool(summary or recent) and not social and _needs_history(folded)
        memory = not social and bool(named or _PERSONAL.search(folded) or _RECOMMEND.search(folded)
                                     or _mentions_key(folded, keys))
        antecedent = _antecedent(summary, recent) if history else ""
        task = f'Following up on "{antecedent}": {new}' if antecedent else new
        # it cannot translate: a question for the documents is the task itself, small talk none
        search = task if documents and not social else ""
        return {"task": task, "search": search, "depends_on_chat_history": history,
                "depends_on_user_memory": memory, "entities": named}
    except Exception:  # noqa: BLE001 - the stand-in must answer; the safe fallback keeps every context
        return json.loads(json.dumps(_SAFE))
