"""The prompt step: build the reply prompt from the context, the memory block, the reference
and the message, within MAX_PROMPT_TOKENS (bot/conversation/prompt.py fits the sections)."""

from __future__ import annotations

from dataclasses import replace

import structlog

from bot.conversation.prompt import BuiltPrompt, build_prompt
from bot.conversation.turn import Turn
from bot.knowledge.reference import reference_section
from bot.llm.prompts import Prompt, system_with_knowledge
from bot.llm.tokens import TokenCounter
from bot.storage.context import Context

log = structlog.get_logger(__name__)


class PromptStep:
    """Build the reply prompt from the context, the memory block and the message, in budget."""

    name = "prompt"
    records = False
    reads = ("stored.claim", "stored.context", "heard.text", "heard.image", "found.knowledge_rules",
             "found.memory_block", "found.task", "found.reference", "answer.prompt_tokens_saved")
    writes = ("answer.prompt", "answer.prompt_tokens_saved")

    def __init__(
        self, counter: TokenCounter, system_prompt: Prompt, knowledge_rules: Prompt | None = None, *,
        unknown_reply: str, max_tokens: int, max_user_tokens: int, full_history: bool,
    ) -> None:
        self.counter = counter
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens  # MAX_PROMPT_TOKENS
        self.max_user_tokens = max_user_tokens  # MAX_USER_MESSAGE_TOKENS
        self.full_history = full_history  # CONTEXT_STRATEGY=full_history: the baseline keeps everything
        # While the knowledge base holds documents: how to use the reference, and what to say
        # when it does not cover a question about the business.
        self.with_rules = system_with_knowledge(system_prompt, knowledge_rules, unknown_reply)

    def __call__(self, turn: Turn) -> None:
        text, task = turn.heard.text, turn.found.task
        assert text is not None
        unbounded = self.full_history and turn.stored.claim is not None
        system = self.with_rules if turn.found.knowledge_rules else self.system_prompt.text
        reference = turn.found.reference
        section = reference_section(reference, self.counter) if reference is not None else None

        def build(context: Context) -> BuiltPrompt:
            return build_prompt(
                system, context, text, self.counter,
                max_tokens=None if unbounded else self.max_tokens,
                max_user_tokens=self.max_user_tokens,
                memory_block=turn.found.memory_block,
                resolved_task=resolved(task.task if task is not None else None, text),
                image=turn.heard.image,
                reference=section,
            )

        prompt = build(turn.stored.context)
        if task is not None and not task.depends_on_chat_history:
            # the task needs no history: the summary and the recent pairs stay out
            full, prompt = prompt, build(replace(turn.stored.context, summary="", recent=[]))
            turn.answer.prompt_tokens_saved += full.tokens - prompt.tokens
        turn.answer.prompt = prompt
        if task is not None:
            log.info("task.applied", prompt_tokens_saved=turn.answer.prompt_tokens_saved)
        log.debug(
            "prompt.built",
            tokens=prompt.tokens,
            pairs_used=prompt.pairs_used,
            pairs_dropped=prompt.pairs_dropped,
            summary_truncated=prompt.summary_truncated,
            user_truncated=prompt.user_truncated,
        )


def resolved(task: str | None, text: str) -> str:
    """Return the resolved task for the reply prompt; "" when it only repeats the message
    (its line would cost tokens and say nothing)."""
    if task is None:
        return ""
    same = " ".join(task.casefold().split()).strip(" .?!") == " ".join(text.casefold().split()).strip(" .?!")
    return "" if same else task
