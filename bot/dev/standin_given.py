"""What the stand-in model says it was given, so a newcomer sees memory, summaries, knowledge,
photos and voice notes working in `chat`: its replies quote, briefly, the facts of the memory
block, the summary's first words and the resolved task; its summaries are the conversation's
own sentences."""

from __future__ import annotations

import json
from typing import Any

from bot.llm.fence import MEMORY_HEADER, SUMMARY_HEADER

#: The summary prompt's user message starts with this (bot/conversation/summary.py).
SUMMARY_REQUEST = "Current summary:"
#: The resolved task's line (bot/conversation/prompt.py RESOLVED_PREFIX).
TASK_PREFIX = "The user's request, resolved"
#: A stand-in summary keeps about this many words, the newest.
SUMMARY_WORDS = 90


def _system_blocks(messages: list[dict[str, Any]], header: str) -> list[str]:
    return [m["content"] for m in messages
            if m.get("role") == "system" and isinstance(m.get("content"), str) and m["content"].startswith(header)]


def memory_facts(messages: list[dict[str, Any]]) -> list[str]:
    """Return the memory block's facts as `key "value"`."""
    facts = []
    for block in _system_blocks(messages, MEMORY_HEADER):
        for line in block.splitlines():
            if line.startswith("- ") and ": " in line:
                key, _, value = line[2:].partition(": ")
                value = value.split(" CONFLICT:")[0]
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
                facts.append(f"{key} “{value}”")
    return facts


def fenced_data(messages: list[dict[str, Any]], header: str) -> list[str]:
    """Return the data lines of the prompt's fenced blocks under `header` (bot/llm/fence.py:
    each a JSON string on its own line), decoded."""
    found = []
    for block in _system_blocks(messages, header):
        for line in block.splitlines():
            if line.startswith('"'):
                try:
                    found.append(str(json.loads(line)))
                except ValueError:
                    continue
    return found


def summary_start(messages: list[dict[str, Any]], words: int = 10) -> str:
    """Return the first words of the summary block, or ""."""
    data = fenced_data(messages, SUMMARY_HEADER)
    if not data:
        return ""
    head = data[0].split()
    return " ".join(head[:words]) + ("…" if len(head) > words else "")


def given(messages: list[dict[str, Any]]) -> str:
    """Return what reached the model besides the message, said briefly ("" for nothing)."""
    parts = []
    facts = memory_facts(messages)
    if facts:
        parts.append("Known about you: " + ", ".join(facts) + ".")
    start = summary_start(messages)
    if start:
        parts.append(f"The summary so far: “{start}”")
    task = next((m["content"] for m in messages if m.get("role") == "system" and isinstance(m.get("content"), str)
                 and m["content"].startswith(TASK_PREFIX)), "")
    if task:
        parts.append("Resolved request: " + task.partition(":")[2].strip() + ".")
    return " ".join(parts)


def summary_reply(messages: list[dict[str, Any]]) -> str | None:
    """Answer a summary request with the conversation's own sentences: the old summary, then
    what the user said, newest kept (None: not a summary request)."""
    request = next((m.get("content") for m in messages if m.get("role") == "user"), None)
    if not isinstance(request, str) or not request.startswith(SUMMARY_REQUEST):
        return None
    head, _, exchanges = request.partition("\nNew exchanges:")
    old = head.removeprefix(SUMMARY_REQUEST).strip()
    said = [line.removeprefix("User: ").strip() for line in exchanges.splitlines() if line.startswith("User: ")]
    text = " ".join(([old] if old and old != "(none yet)" else []) + (["The user said: " + " / ".join(said)] if said else []))
    words = text.split()
    return " ".join(words[-SUMMARY_WORDS:]) if words else "The user has not said anything yet."
