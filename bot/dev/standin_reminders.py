"""The stand-in model's reading of reminders (docs/reminders.md), in PT, ES and EN: "lembra-me
amanhã às 9h de tomar o antibiótico", "recuérdame el viernes que tengo dentista", "remind me
in 2 hours to call mum", "quais são os meus lembretes?", "cancela o lembrete do dentista",
"estou em Manaus". It reads the user's time now from the line the bot gives with the tools,
calls the built-in tools as a model would, and says what they answered. Deterministic, and
never for production (bot/dev/standin.py)."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta
from typing import Any

from bot.dev.standin_tools import _results, call

_SET = re.compile(r"\b(lembra[- ]?me|lembre[- ]?me|lembrar[- ]?me|me lembra|me lembre|recuerdame|recordame|recuerda(?:me)?|"
                  r"remind me|avisa[- ]?me|me avisa|avisame)\b")
_LIST = re.compile(r"\b(meus lembretes|os lembretes|mis recordatorios|los recordatorios|my reminders|/reminders|"
                   r"que lembretes|que recordatorios|what reminders)\b")
_CANCEL = re.compile(r"\b(cancela|cancelar|cancele|anula|apaga|borra|cancel|delete)\b.*\b(lembrete|recordatorio|reminder)")
_ZONE = re.compile(r"\b(estou em|vivo em|moro em|estoy en|vivo en|i am in|i'm in|im in|i live in)\s+([a-z .]+)")
CITIES = {
    "manaus": "America/Manaus", "lisboa": "Europe/Lisbon", "lisbon": "Europe/Lisbon", "porto": "Europe/Lisbon",
    "madrid": "Europe/Madrid", "barcelona": "Europe/Madrid", "sao paulo": "America/Sao_Paulo",
    "rio": "America/Sao_Paulo", "rio de janeiro": "America/Sao_Paulo", "new york": "America/New_York",
    "london": "Europe/London", "londres": "Europe/London", "mexico": "America/Mexico_City",
    "ciudad de mexico": "America/Mexico_City", "bogota": "America/Bogota", "buenos aires": "America/Argentina/Buenos_Aires",
    "lima": "America/Lima", "santiago": "America/Santiago", "acores": "Atlantic/Azores", "azores": "Atlantic/Azores",
    "canarias": "Atlantic/Canary", "tenerife": "Atlantic/Canary", "los angeles": "America/Los_Angeles",
}
_NOW = re.compile(r"Now(?:, for the user)?: (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)")
_IN = re.compile(r"\b(?:daqui a|dentro de|en|em|in)\s+(\d{1,3}|um|uma|un|una|an|a|one)\s+"
                 r"(segundos?|seconds?|secs?|minutos?|minutes?|mins?|horas?|hours?|hrs?|dias?|days?)\b")
_AT = re.compile(r"\b(?:as|a las|a la|at|pelas)\s+(\d{1,2})(?:[:h](\d{2})|h|\s*(am|pm))?\b|\b(\d{1,2})(?:[:h](\d{2})|h|"
                 r"\s*(am|pm))\b")
DAYS = {
    "pt": ["segunda", "terca", "quarta", "quinta", "sexta", "sabado", "domingo"],
    "es": ["lunes", "martes", "miercoles", "jueves", "viernes", "sabado", "domingo"],
    "en": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"],
}
_RELATIVE_DAYS = ((r"depois de amanha|pasado manana|day after tomorrow", 2), (r"amanha|manana|tomorrow", 1),
                  (r"hoje|hoy|today|tonight|esta noite|esta noche", 0))
_CONNECTORS = re.compile(r"^(?:\W|de |do |da |que |to |para |about |of |a |el |la |o |the |on |no |na )+")
SAID = {
    "pt": ("Lembrete marcado: «{text}», {when}.", "Os seus lembretes: {items}.", "Não tem lembretes marcados.",
           "Cancelei o lembrete «{text}».", "Não consegui: {detail}.", "Fuso horário guardado: {zone}."),
    "es": ("Recordatorio creado: «{text}», {when}.", "Sus recordatorios: {items}.", "No tiene recordatorios.",
           "He cancelado el recordatorio «{text}».", "No he podido: {detail}.", "Zona horaria guardada: {zone}."),
    "en": ("Reminder set: \"{text}\", {when}.", "Your reminders: {items}.", "You have no reminders.",
           "I cancelled the reminder \"{text}\".", "I couldn't: {detail}.", "Time zone saved: {zone}."),
}


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFC", text).lower())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _language(plain: str) -> str:
    if re.search(r"\b(recuerdame|recordame|mis |recordatorio|estoy|manana|el |que tengo|las )\b", plain):
        return "es"
    if re.search(r"\b(lembr|meus|amanha|estou|hoje|as |de tomar|lembrete)", plain):
        return "pt"
    return "en"


def _now(messages: list[dict[str, Any]]) -> datetime | None:
    for message in messages:
        if message.get("role") == "system":
            found = _NOW.search(str(message.get("content", "")))
            if found:
                return datetime.fromisoformat(found.group(1))
    return None


def _count(word: str) -> int:
    return int(word) if word.isdigit() else 1


def due_of(text: str, now: datetime) -> tuple[datetime | None, list[tuple[int, int]]]:
    """Return when the message asks for, and the spans of the words that said it."""
    plain = _plain(text)
    spans: list[tuple[int, int]] = []
    found = _IN.search(plain)
    if found:
        n, unit = _count(found.group(1)), found.group(2)
        delta = (timedelta(seconds=n) if unit.startswith("seg") or unit.startswith("sec") else
                 timedelta(minutes=n) if unit.startswith("min") else
                 timedelta(hours=n) if unit.startswith(("hora", "hour", "hr")) else timedelta(days=n))
        return now + delta, [found.span()]
    day: datetime | None = None
    for pattern, ahead in _RELATIVE_DAYS:
        hit = re.search(rf"\b({pattern})\b", plain)
        if hit:
            day, spans = now + timedelta(days=ahead), [hit.span()]
            break
    if day is None:
        for names in DAYS.values():
            for index, name in enumerate(names):
                hit = re.search(rf"\b(?:(?:na|no|el|on|this|next|proxima|proximo|este|esta)\s+)?{name}(?:-feira)?\b", plain)
                if hit:
                    ahead = (index - now.weekday()) % 7 or 7
                    day, spans = now + timedelta(days=ahead), [hit.span()]
                    break
            if day is not None:
                break
    clock = _AT.search(plain)
    hour = minute = None
    if clock:
        groups = clock.groups()
        hour = int(groups[0] or groups[3])
        minute = int(groups[1] or groups[4] or 0)
        half = groups[2] or groups[5]
        if half == "pm" and hour < 12:
            hour += 12
        if hour > 23 or minute > 59:
            hour = minute = None
        else:
            spans.append(clock.span())
    if day is None and hour is None:
        return None, []
    if day is None:
        assert hour is not None and minute is not None
        moment = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        return (moment if moment > now else moment + timedelta(days=1)), spans
    return day.replace(hour=9 if hour is None else hour, minute=minute or 0, second=0, microsecond=0), spans


def reminder_text(text: str, spans: list[tuple[int, int]]) -> str:
    """Return what to be reminded of: the message without its asking and its time."""
    original = unicodedata.normalize("NFC", text)
    plain = _plain(text)
    ask = _SET.search(plain)
    cut = sorted([*spans, *([ask.span()] if ask else [])])
    kept, last = [], 0
    for start, end in cut:
        if start >= last:
            kept.append(original[last:start])
            last = end
    kept.append(original[last:])
    words = " ".join(" ".join(kept).split())
    while True:
        stripped = _CONNECTORS.sub("", words.lower())
        if stripped == words.lower():
            break
        words = words[len(words) - len(stripped):]
    return words.strip(" .!?,") or original.strip()


def reminder_answer(body: dict[str, Any], last_user: str) -> tuple[list[dict[str, Any]], str | None] | None:
    """Return (tool calls, text) when the message is about reminders and the bot offers the
    reminder tools; None: not the stand-in's reminders to answer."""
    offered = {t.get("function", {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)}
    if "set_reminder" not in offered:
        return None
    messages = body.get("messages") or []
    plain = _plain(last_user)
    lang = _language(plain)
    said = SAID[lang]
    results = _results(messages)
    may_call = body.get("tool_choice") != "none"
    if results:
        last = results[-1]
        data = last.get("data", last) if isinstance(last, dict) else last
        if not isinstance(data, dict):
            return None
        if "error" in data:
            return [], said[4].format(detail=data.get("detail") or data["error"])
        if data.get("set"):
            note = f" {data['note']}" if data.get("note") else ""
            return [], said[0].format(text=data.get("text", ""), when=data.get("when", "")) + note
        if data.get("cancelled"):
            return [], said[3].format(text=data.get("text", ""))
        if "time_zone" in data and "now" in data:
            return [], said[5].format(zone=data["time_zone"])
        if "reminders" in data:
            listed = data["reminders"] or []
            if _CANCEL.search(plain) and may_call and listed:
                words = set(re.findall(r"\w{4,}", plain))
                best = max(listed, key=lambda r: len(words & set(re.findall(r"\w{4,}", _plain(str(r.get("text")))))))
                return [call("cancel_reminder", {"id": str(best.get("id"))})], None
            if not listed:
                return [], said[2]
            return [], said[1].format(items="; ".join(f"{r.get('when')}: {r.get('text')}" for r in listed))
        return None
    if not may_call:
        return None
    zone = _ZONE.search(plain) if len(plain.split()) <= 6 else None  # "estou em Manaus", not a story
    if zone:
        city = zone.group(2).strip(" .")
        for name, tz in CITIES.items():
            if city.startswith(name):
                return [call("set_time_zone", {"time_zone": tz})], None
    if _CANCEL.search(plain) or _LIST.search(plain):
        return [call("list_reminders", {})], None
    if not _SET.search(plain):
        return None
    now = _now(messages)
    if now is None:
        return None
    due, spans = due_of(last_user, now)
    if due is None:
        return [], {"pt": "Para quando quer o lembrete?", "es": "¿Para cuándo quiere el recordatorio?",
                    "en": "When should I remind you?"}[lang]
    return [call("set_reminder", {"text": reminder_text(last_user, spans),
                                  "due": due.isoformat(timespec="seconds")})], None
