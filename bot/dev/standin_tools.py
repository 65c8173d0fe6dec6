"""The stand-in model's tool calls (docs/tools.md): a deterministic reading of the last user
message in PT, ES or EN that picks one of the offered tools by what its name says (free
slots, my appointments, book, cancel), with the day and time the message gives, and a short
text answer once the tools have answered. Never for production (bot/dev/standin.py)."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import date, timedelta
from typing import Any

#: Words of each intent, without accents; checked in this order.
INTENTS = (
    ("cancel", ("cancel", "cancela", "desmarca", "anula", "anular")),
    ("book", ("marca", "marcar", "agenda", "agendar", "reserva", "reservar", "book", "quero a das", "quiero la de")),
    ("mine", ("minha consulta", "minhas consultas", "mi cita", "mis citas", "my appointment", "a que horas e a minha",
              "a que hora es mi")),
    ("free", ("vaga", "vagas", "livre", "disponivel", "hueco", "huecos", "libre", "disponible", "free", "slot",
              "available", "horario")),
)
#: Which offered tool serves an intent: the first whose name holds one of these.
TOOL_WORDS = {"cancel": ("cancel",), "book": ("book", "create", "schedule"), "mine": ("my_", "mine"),
              "free": ("free", "slot", "availab")}
#: The bot's own tools (bot/reminders/tools.py), never the business's.
BUILT_IN = frozenset({"set_reminder", "list_reminders", "cancel_reminder", "set_time_zone"})
_TIME = re.compile(r"\b(\d{1,2})(?:[:h](\d{2})|h|\s*(am|pm))\b")
_DAY = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def intent_of(text: str) -> str | None:
    """Return what the message asks of the business's system, if anything."""
    plain = _plain(text)
    for intent, words in INTENTS:
        if any(re.search(rf"\b{re.escape(w)}", plain) for w in words):
            return intent
    return None


def day_of(text: str, today: date) -> str:
    """Return the day the message names (tomorrow unless it says today or gives a date)."""
    plain = _plain(text)
    found = _DAY.search(plain)
    if found:
        return found.group(1)
    if re.search(r"\b(hoje|hoy|today)\b", plain):
        return today.isoformat()
    return (today + timedelta(days=1)).isoformat()


def time_of(text: str) -> str | None:
    """Return the time the message gives, as HH:MM ("10h", "10:30", "3 pm")."""
    found = _TIME.search(_plain(text))
    if not found:
        return None
    hour, minute = int(found.group(1)), int(found.group(2) or 0)
    if found.group(3) == "pm" and hour < 12:
        hour += 12
    return f"{hour:02d}:{minute:02d}" if hour < 24 and minute < 60 else None


def _tool_for(intent: str, offered: list[str]) -> str | None:
    return next((name for name in offered if any(w in name for w in TOOL_WORDS[intent])), None)


def _results(messages: list[dict[str, Any]]) -> list[Any]:
    """Return the data of this turn's tool answers (after the last user message)."""
    out = []
    for message in messages:
        if message.get("role") == "user":
            out = []
        elif message.get("role") == "tool":
            for line in str(message.get("content", "")).splitlines():
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:  # an answer cut to the budget
                        out.append({"data": line[:200]})
    return out


def _first_id(value: Any) -> str | None:
    if isinstance(value, dict):
        if isinstance(value.get("id"), (str, int)) and value.get("status", "booked") != "cancelled":
            return str(value["id"])
        for item in value.values():
            found = _first_id(item)
            if found:
                return found
    if isinstance(value, list):
        for item in value:
            found = _first_id(item)
            if found:
                return found
    return None


def plain(value: Any) -> str:
    """Return a tool's answer in plain words, as a model would read it out: a record's fields
    as "name: value" ("day: 2030-01-08; slots: 09:30, 10:00"), records apart by " | "."""
    if isinstance(value, list):
        joiner = " | " if value and isinstance(value[0], dict) else ", "
        return joiner.join(plain(item) for item in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{key.replace('_', ' ')}: {plain(item) if item not in (None, '') else '-'}"
                         for key, item in value.items())
    return str(value)


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return one tool call as Chat Completions writes it."""
    text = json.dumps(arguments, ensure_ascii=False)
    return {"id": "call_" + hashlib.sha256(f"{name}{text}".encode()).hexdigest()[:16], "type": "function",
            "function": {"name": name, "arguments": text}}


def tool_answer(body: dict[str, Any], last_user: str, today: date) -> tuple[list[dict[str, Any]], str | None]:
    """Return (tool calls, text): the calls this request should make, or the text answer
    once the tools have answered (None: answer as without tools)."""
    offered = [t.get("function", {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    offered = [name for name in offered if name not in BUILT_IN]  # the reminders': bot/dev/standin_reminders.py
    may_call = offered and body.get("tool_choice") != "none"
    messages = body.get("messages") or []
    results = _results(messages)
    intent = intent_of(last_user)
    if results:
        if may_call and intent == "cancel" and not any(m.get("tool_calls") and any(
                "cancel" in c.get("function", {}).get("name", "") for c in m["tool_calls"])
                for m in messages[-4:] if isinstance(m, dict)):
            target, tool = _first_id(results[-1].get("data")), _tool_for("cancel", offered)
            if target and tool:
                return [call(tool, {"appointment_id": target})], None
        return [], f"From the business's system: {plain(results[-1].get('data', results[-1]))[:400]}"
    if not may_call or intent is None:
        return [], None
    if intent == "cancel":
        tool = _tool_for("mine", offered)  # look the appointment up first
        return ([call(tool, {})], None) if tool else ([], None)
    tool = _tool_for(intent, offered)
    if tool is None:
        return [], None
    if intent == "book":
        at = time_of(last_user)
        if at is None:
            free = _tool_for("free", offered)
            return ([call(free, {"day": day_of(last_user, today)})], None) if free else ([], None)
        return [call(tool, {"day": day_of(last_user, today), "time": at, "service": "checkup"})], None
    if intent == "free":
        return [call(tool, {"day": day_of(last_user, today)})], None
    return [call(tool, {})], None
