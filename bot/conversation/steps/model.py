"""The model step: ask the reply model, with what is left of the turn's deadline; a failure
leaves no completion, and the judge answers with the fallback."""

from __future__ import annotations

from bot.conversation.turn import Turn
from bot.exceptions import LLMUnavailable
from bot.llm.client import LLMClient


class ModelStep:
    """Ask the reply model; a failure leaves no completion for the judge."""

    name = "model"
    records = False
    reads = ("answer.prompt", "heard.image")
    writes = ("answer.completion",)

    def __init__(self, llm: LLMClient, *, prompt_ref: str, max_tokens: int, vision_model: str,
                 redis_worst_s: float) -> None:
        self.llm = llm
        self.vision_model = vision_model
        self.max_tokens = max_tokens  # REPLY_MAX_TOKENS
        self.prompt_ref = prompt_ref
        # Left after the model for the commit and the hand-off, each one Redis command at worst.
        self.after_model_s = 2 * redis_worst_s

    def __call__(self, turn: Turn) -> None:
        prompt = turn.answer.prompt
        assert prompt is not None
        budget = turn.remaining() - self.after_model_s
        try:
            turn.answer.completion = self.llm.complete(
                prompt.messages,
                purpose="reply",
                prompt_ref=self.prompt_ref,
                max_tokens=self.max_tokens,
                deadline_s=budget,
                model=self.vision_model if turn.heard.image is not None else None,
            )
        except LLMUnavailable:
            turn.answer.completion = None
