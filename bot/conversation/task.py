"""Task extraction (docs/tasks.md): compress the message, with the conversation, into one
resolved task, and say whether answering it needs the history and the user's memory.

The task step (bot/conversation/steps/task.py) runs before `memory` when TASK_EXTRACTION=on,
unless the user turned it off (`/task:off`). One call on TASK_MODEL (prompts/extract_task.md, Structured Outputs, a lenient parse);
network errors, timeouts, 429 and 5xx are tried 3 times with exponential backoff, all
inside TASK_DEADLINE_S; an answer that does not fit the schema is not retried. Any failure
is the bypass: no task, the full context, both flags true. The steps after it read its flags:
`memory` keeps only safety facts when memory is not needed, `prompt` leaves out the summary
and the recent pairs when history is not needed, and adds the resolved task.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from pydantic import BaseModel, Field, ValidationError

from bot.exceptions import LLMUnavailable
from bot.llm.client import Completion, LLMClient
from bot.llm.prompts import Prompt
from bot.llm.fence import inert
from bot.memory.matching import EntityMatch
from bot.memory.names import entity_key, normalize_name
from bot.memory.schema import json_candidates
from bot.observability.metrics import TASKS
from bot.storage.entities import Entity
from bot.storage.records import Pair, decode_facts

log = structlog.get_logger(__name__)

#: Attempts of the task call (the first and two retries), all inside TASK_DEADLINE_S.
TASK_ATTEMPTS = 3
#: Kept for the reply call after the task call: it never eats the reply's time.
REPLY_RESERVE_S = 6.0
#: Recent pairs shown to the task model (the newest).
TASK_RECENT_PAIRS = 3
#: Matches the task model's entity list confirms or drops (one word found as written).
CHECKED_STRATEGIES = frozenset({"exact", "normalized", "initials"})
#: Facts kept when memory is not needed: what keeps the user safe (allergies, medications).
SAFETY_CATEGORIES = frozenset({"health"})


class TaskEntity(BaseModel):
    """An entity the model says the message mentions."""

    name: str = Field(min_length=1, max_length=80)
    type: str = Field(min_length=1, max_length=20)


class ExtractedTask(BaseModel):
    """The task model's answer."""

    task: str = Field(min_length=1, max_length=600)
    # The question restated for searching the business's documents, in their language ("" when
    # it asks nothing of the business; absent from an old or lenient answer): what the
    # knowledge search reads and embeds (docs/tasks.md).
    search: str = Field(default="", max_length=600)
    depends_on_chat_history: bool
    depends_on_user_memory: bool
    # None when the answer left the list out (a lenient parse of a non-strict server): then
    # the model said nothing about the entities, and no match is dropped.
    entities: list[TaskEntity] | None = None


#: Structured Outputs schema (strict: every property required, nothing else allowed).
TASK_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "user_task",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["task", "search", "depends_on_chat_history", "depends_on_user_memory", "entities"],
            "properties": {
                "task": {"type": "string"},
                "search": {"type": "string"},
                "depends_on_chat_history": {"type": "boolean"},
                "depends_on_user_memory": {"type": "boolean"},
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "type"],
                        "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
                    },
                },
            },
        },
    },
}


def parse_task(text: str) -> ExtractedTask | None:
    """Parse the answer: strict JSON, then leniently (fences stripped, the outermost {...});
    None when it does not fit the schema (never raises)."""
    for attempt in json_candidates(text):
        try:
            return ExtractedTask.model_validate(json.loads(attempt))
        except (ValueError, ValidationError):
            continue
    return None


def render_task_request(
    text: str, summary: str, recent: list[Pair], fact_keys: list[str], entities: list[str],
    documents: list[str] | None = None,
) -> str:
    """Return the task request: the languages of the business's documents (when it has
    some), fact keys and entity names (never values), the summary, the newest pairs and the
    message, each text an inert JSON string."""
    lines = [f"Documents' languages: {', '.join(documents)}"] if documents else []
    lines += [f"Known fact keys: {', '.join(fact_keys) or '(none)'}", f"Known entities: {', '.join(entities) or '(none)'}",
             f"Summary: {inert(summary) if summary else '(none)'}", "Recent messages:"]
    for pair in recent[-TASK_RECENT_PAIRS:]:
        lines += [f"User: {inert(pair.user)}", f"Assistant: {inert(pair.assistant)}"]
    if not recent:
        lines.append("(none)")
    lines.append(f"New message: {inert(text)}")
    return "\n".join(lines)


def ask_for_task(llm: LLMClient, prompt: Prompt, request: str, *, model: str, deadline_s: float) -> Completion:
    """Ask the task model; 3 attempts on network errors, timeouts, 429 and 5xx, all within
    deadline_s; raise LLMUnavailable."""
    messages = [{"role": "system", "content": prompt.text}, {"role": "user", "content": request}]
    return llm.complete(
        messages, purpose="task", prompt_ref=prompt.ref, model=model, max_tokens=250, response_format=TASK_SCHEMA,
        temperature=0, deadline_s=deadline_s, max_retries=TASK_ATTEMPTS - 1,
    )


def search_text(task: ExtractedTask | None, message: str) -> str:
    """Return what the knowledge search reads and the embed step embeds: the task's
    restatement for the documents, else the resolved task, else the message."""
    if task is None:
        return message
    return task.search.strip() or task.task


def model_matches(task: ExtractedTask, matches: list[EntityMatch], entities: dict[str, Entity]) -> list[EntityMatch]:
    """Return the user's known entities the task model named that matching had not found."""
    found = {m.key for m in matches}
    by_name = {normalize_name(n): e for e in entities.values() for n in e.names()}
    out = []
    for named in task.entities or []:
        entity = entities.get(entity_key(named.type, named.name)) or by_name.get(normalize_name(named.name))
        if entity is not None and entity.key not in found:
            found.add(entity.key)
            out.append(EntityMatch(entity.key, entity.name, entity.type, "model", 1.0, named.name))
    return out


def checked_by_task(
    task: ExtractedTask, matches: list[EntityMatch], entities: dict[str, Entity]
) -> tuple[list[EntityMatch], list[EntityMatch]]:
    """Split the matches into those kept and those the task model read otherwise: a one-word
    name found as written (exact, normalized, or initials) that the model, which saw the
    user's entities and the message, did not name is the word, not the entity ("kinako
    powder", "the Canelo fight", "the AC is broken"). Misspellings, short forms and longer
    names stay: a model may not name those. Nothing is dropped when the answer had no list."""
    if task.entities is None:
        return list(matches), []
    named = {normalize_name(n.name) for n in task.entities} | {entity_key(n.type, n.name) for n in task.entities}
    kept, dropped = [], []
    for match in matches:
        entity = entities.get(match.key)
        forms = {match.key, normalize_name(match.text), *(normalize_name(n) for n in (entity.names() if entity else []))}
        one_word_as_written = match.strategy in CHECKED_STRATEGIES and len(match.text.split()) == 1
        (dropped if one_word_as_written and not forms & named else kept).append(match)
    return kept, dropped


def with_task_entities(
    task: ExtractedTask, matches: list[EntityMatch], entities: dict[str, Entity], check: bool
) -> tuple[list[EntityMatch], list[EntityMatch]]:
    """Return the matches after the task model's entity list (checked when `check`, then
    added to), and those it dropped."""
    dropped: list[EntityMatch] = []
    if check:
        matches, dropped = checked_by_task(task, matches, entities)
    return [*matches, *model_matches(task, matches, entities)], dropped
