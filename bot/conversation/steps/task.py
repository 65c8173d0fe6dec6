"""The task step: resolve the message, with the conversation, into one task, and say what
context answering it needs (bot/conversation/task.py; docs/tasks.md)."""

from __future__ import annotations

from typing import Callable

import structlog

from bot.conversation.task import (
    REPLY_RESERVE_S,
    ask_for_task,
    parse_task,
    render_task_request,
    with_task_entities,
)
from bot.conversation.turn import Turn
from bot.exceptions import LLMUnavailable
from bot.llm.client import LLMClient
from bot.llm.prompts import Prompt
from bot.observability.metrics import TASKS
from bot.storage.records import decode_facts

log = structlog.get_logger(__name__)


class TaskStep:
    """Resolve the message into a task, and say what context answering it needs."""

    name = "task"
    records = False
    reads = ("stored.claim", "stored.context", "heard.text", "found.entity_matches", "found.entities")
    writes = ("found.task_completion", "found.task", "found.entity_matches")

    def __init__(self, llm: LLMClient, prompt: Prompt, *, on: bool, model: str, deadline_s: float,
                 check_entities: bool, documents: Callable[[], list[str]] | None = None) -> None:
        self.llm = llm
        self.documents = documents  # the knowledge base's languages now (restate the question in them)
        self.prompt = prompt
        self.on = on  # TASK_EXTRACTION == "on"
        self.model = model
        self.deadline_s = deadline_s  # TASK_DEADLINE_S
        self.check_entities = check_entities  # ENTITY_TASK_CHECK

    def __call__(self, turn: Turn) -> None:
        text = turn.heard.text
        if not self.on or turn.stored.claim is None or text is None:
            return
        if turn.stored.memory.task_off:
            TASKS.labels(result="bypassed").inc()
            return
        budget = min(self.deadline_s, turn.remaining() - REPLY_RESERVE_S)
        try:
            languages = self.documents() if self.documents is not None else []
            completion = ask_for_task(self.llm, self.prompt, turn_request(turn, text, languages), model=self.model,
                                      deadline_s=budget)
        except LLMUnavailable as err:  # the bypass: full context, both flags true
            TASKS.labels(result="failed").inc()
            log.warning("task.failed", error=str(err)[:200])
            return
        turn.found.task_completion = completion
        task = parse_task(completion.text)
        if task is None:  # not retried: the same request would get the same answer
            TASKS.labels(result="invalid").inc()
            log.warning("task.invalid")
            return
        turn.found.task = task
        turn.found.entity_matches, dropped = with_task_entities(
            task, turn.found.entity_matches, turn.found.entities, self.check_entities)
        if dropped:  # types and levels only: the names are the user's
            log.info("entities.dropped_by_task", matches=[f"{m.type}:{m.strategy}" for m in dropped])
        TASKS.labels(result="extracted").inc()
        log.info(
            "task.extracted",
            depends_on_chat_history=task.depends_on_chat_history,
            depends_on_user_memory=task.depends_on_user_memory,
            entities=len(task.entities or []),
            task_tokens=completion.prompt_tokens + completion.completion_tokens,
        )  # what the flags saved is logged by the prompt step


def turn_request(turn: Turn, text: str, documents: list[str] | None = None) -> str:
    """Return the task request of a turn."""
    memory, context = turn.stored.memory, turn.stored.context
    keys = sorted({*decode_facts(memory.facts), *decode_facts(memory.session_facts)})
    names = [f"{e.name} ({e.type})" for e in turn.found.entities.values()]
    return render_task_request(text, context.summary, context.recent, keys, names, documents)
