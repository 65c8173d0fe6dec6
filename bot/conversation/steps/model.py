"""The model step: ask the reply model, with what is left of the turn's deadline; a failure
leaves no completion, and the judge answers with the fallback. With the business's tools
(docs/tools.md) it is a short loop: reads are called and their answers given back; a write
becomes a proposal, and the reply asks the user to confirm it."""

from __future__ import annotations

from typing import Any

from bot.conversation.catalog import Catalog
from bot.conversation.tool_use import ToolUse
from bot.conversation.turn import Turn
from bot.exceptions import LLMUnavailable
from bot.llm.client import Completion, LLMClient


class ModelStep:
    """Ask the reply model (with the tools, if any); a failure leaves no completion for the judge."""

    name = "model"
    records = False
    reads = ("answer.prompt", "heard.image", "heard.language", "stored.claim")
    writes = ("answer.completion", "answer.proposal", "answer.tool_calls", "answer.tool_rounds")

    def __init__(self, llm: LLMClient, *, prompt_ref: str, max_tokens: int, vision_model: str,
                 redis_worst_s: float, tools: ToolUse | None = None, catalog: Catalog | None = None) -> None:
        self.llm = llm
        self.vision_model = vision_model
        self.max_tokens = max_tokens  # REPLY_MAX_TOKENS
        self.prompt_ref = prompt_ref
        self.tools = tools
        self.catalog = catalog
        # Left after the model for the commit and the hand-off, each one Redis command at worst.
        self.after_model_s = 2 * redis_worst_s

    def __call__(self, turn: Turn) -> None:
        prompt = turn.answer.prompt
        assert prompt is not None
        model = self.vision_model if turn.heard.image is not None else None

        def ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                tool_choice: str | None = None, _left: float = 0.0) -> Completion:
            return self.llm.complete(messages, purpose="reply", prompt_ref=self.prompt_ref, max_tokens=self.max_tokens,
                                     deadline_s=turn.remaining() - self.after_model_s, model=model, tools=tools,
                                     tool_choice=tool_choice)

        try:
            if self.tools is None or turn.stored.claim is None:  # no tools without a place to keep a proposal
                turn.answer.completion = ask(prompt.messages)
                return
            used = self.tools.run(ask, prompt.messages, user=turn.msg.user, sid=turn.msg.sid,
                                  remaining=lambda: turn.remaining() - self.after_model_s, from_=turn.msg.to)
        except LLMUnavailable:
            turn.answer.completion = None
            return
        turn.answer.tool_calls = used.calls
        turn.answer.tool_rounds = used.rounds[1:]  # counted in usage as `tool_rounds`
        completion = used.completion
        if used.proposal is not None and completion is not None and self.catalog is not None:
            turn.answer.proposal = used.proposal
            text = self.catalog.text("tool_confirm", turn.heard.language, action=used.proposal["summary"])
            completion = Completion(text=text, finish_reason="stop", model=completion.model,
                                    prompt_tokens=completion.prompt_tokens,
                                    completion_tokens=completion.completion_tokens, duration_s=completion.duration_s)
        turn.answer.completion = completion
