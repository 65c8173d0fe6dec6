"""Replies out to Twilio: TwiML, split to fit WhatsApp's 1600-character message limit."""

from __future__ import annotations

import re

from twilio.twiml.messaging_response import MessagingResponse

#: Twilio rejects WhatsApp message bodies longer than this.
MAX_MESSAGE_CHARS = 1600

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def _split_long(piece: str, limit: int) -> list[str]:
    """Split one paragraph at sentence ends, then spaces, then anywhere."""
    if len(piece) <= limit:
        return [piece]
    units = _SENTENCE_END.split(piece)
    if len(units) == 1:
        units = piece.split(" ")
    if len(units) == 1:
        return [piece[i : i + limit] for i in range(0, len(piece), limit)]
    return _pack(units, limit, " ")


def _pack(units: list[str], limit: int, joiner: str) -> list[str]:
    """Greedily join units with joiner into chunks no longer than limit."""
    chunks: list[str] = []
    current = ""
    for unit in units:
        for part in _split_long(unit, limit) if len(unit) > limit else [unit]:
            candidate = f"{current}{joiner}{part}" if current else part
            if len(candidate) <= limit:
                current = candidate
            else:
                if current:
                    chunks.append(current)
                current = part
    if current:
        chunks.append(current)
    return chunks


def split_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Split text into messages of at most limit characters at natural boundaries."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= limit:
        return [text]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return [chunk.strip() for chunk in _pack(paragraphs, limit, "\n\n") if chunk.strip()]


def render(reply: str) -> str:
    """Return a TwiML document with the reply as one or more messages (none if empty)."""
    response = MessagingResponse()
    for chunk in split_message(reply):
        response.message(chunk)
    return str(response)
