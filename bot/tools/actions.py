"""A write the model asked for, as the user sees it before it runs (docs/tools.md): its plain
description, its stable id (the Idempotency-Key of its one call), and what counts as yes."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

from bot.tools.openapi import ToolSpec

#: Whole answers that confirm, in PT, ES and EN, without accents (a thumbs-up too).
AFFIRM = frozenset({
    "yes", "y", "yep", "yeah", "yup", "sure", "ok", "okay", "okey", "k", "confirm", "confirmed", "correct",
    "sim", "s", "confirmo", "confirmado", "claro", "certo", "isso", "correto", "pode", "bora", "combinado",
    "si", "vale", "dale", "confirmar", "correcto", "perfecto", "perfeito", "afirmativo", "listo", "acuerdo", "adelante",
    "ahead",
    "\U0001f44d", "\u2705", "\U0001f44c",
})
#: Words that may go with a yes without changing it ("sim, por favor", "yes please, go ahead").
COURTESY = frozenset({
    "please", "pls", "thanks", "thank", "you", "go", "ahead", "do", "it", "that", "fine", "great", "absolutely",
    "por", "favor", "pf", "obrigado", "obrigada", "brigado", "pode", "ser", "fazer", "faz", "isso", "manda",
    "gracias", "adelante", "hazlo", "de", "acuerdo", "esta", "bien", "es", "eso", "muito", "bem",
})
_EMOJI = re.compile("[\U0001f44d\u2705\U0001f44c]")
_NOT_WORD = re.compile(r"[^\w\U0001f44d\u2705\U0001f44c]+")
#: A longer answer is a new message, not a yes.
MAX_WORDS = 6


def _plain(text: str) -> list[str]:
    text = unicodedata.normalize("NFKD", text.lower())
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).replace("\ufe0f", "")
    text = _EMOJI.sub(lambda m: f" {m.group(0)} ", text)
    text = re.sub("[\U0001f3fb-\U0001f3ff]", "", text)  # a skin tone on the thumbs-up
    return [word for word in _NOT_WORD.split(text) if word]


def is_affirmation(text: str | None) -> bool:
    """Return whether a message is a plain yes ("sim", "Sí, por favor", "ok 👍"), and nothing
    more: an answer that adds a condition ("yes but at 11") is not one."""
    words = _plain(text or "")
    if not words or len(words) > MAX_WORDS or any(ch.isdigit() for word in words for ch in word):
        return False
    return any(word in AFFIRM for word in words) and all(word in AFFIRM or word in COURTESY for word in words)


def shown_arguments(tool: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the arguments the user is shown and the call will send (the caller's own number
    is filled in at the call, never shown)."""
    known = {a.name for a in tool.arguments if not a.user}
    return {name: value for name, value in arguments.items() if name in known}


def action_id(user: str, sid: str, tool: str, arguments: dict[str, Any]) -> str:
    """Return the action's stable id: the same proposal always has the same one."""
    canonical = json.dumps([user, sid, tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "act_" + hashlib.sha256(canonical.encode()).hexdigest()[:24]


def describe(tool: ToolSpec, arguments: dict[str, Any]) -> str:
    """Return what the action does in plain words: the operation's summary and each argument."""
    what = (tool.summary or tool.description or tool.name).strip().rstrip(".")
    shown = []
    for name, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown.append(f"{name.replace('_', ' ')}: {text}")
    return what + (f" ({'; '.join(shown)})" if shown else "")
