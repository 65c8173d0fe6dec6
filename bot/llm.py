"""The model client: Chat Completions through the openai SDK, errors turned into ours."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import openai
import structlog

from bot.config import Settings
from bot.exceptions import LLMUnavailable
from bot.metrics import MODEL_TOKENS

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Completion:
    """One model answer and what it cost."""

    text: str
    finish_reason: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    duration_s: float


def make_openai_client(settings: Settings) -> openai.OpenAI:
    """Build the SDK client with the timeout and bounded retries the webhook can afford."""
    return openai.OpenAI(
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL,
        timeout=settings.LLM_TIMEOUT_S,
        max_retries=settings.LLM_MAX_RETRIES,
    )


class LLMClient:
    """Ask one model for completions; every failure becomes LLMUnavailable."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client = client
        self.model = model

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        purpose: str,
        prompt_ref: str,
        max_tokens: int,
        model: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Return the model's completion of messages, or raise LLMUnavailable."""
        model = model or self.model
        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = response_format
        if temperature is not None:
            extra["temperature"] = temperature
        started = time.perf_counter()
        try:
            response = self.client.chat.completions.create(
                model=model, messages=messages, max_tokens=max_tokens, **extra  # type: ignore[arg-type]
            )
        except openai.OpenAIError as err:
            duration = time.perf_counter() - started
            status = getattr(err, "status_code", None)
            log.warning(
                "llm.failed",
                purpose=purpose,
                model=model,
                prompt=prompt_ref,
                error=type(err).__name__,
                status=status,
                duration_ms=round(duration * 1000, 1),
            )
            raise LLMUnavailable(f"{type(err).__name__}: {err}") from err
        duration = time.perf_counter() - started
        if not response.choices:
            raise LLMUnavailable("the model returned no choices")
        choice = response.choices[0]
        usage = response.usage
        completion = Completion(
            text=(choice.message.content or "").strip(),
            finish_reason=choice.finish_reason or "unknown",
            model=response.model or model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            duration_s=duration,
        )
        MODEL_TOKENS.labels(purpose=purpose, kind="prompt").inc(completion.prompt_tokens)
        MODEL_TOKENS.labels(purpose=purpose, kind="completion").inc(completion.completion_tokens)
        log.info(
            "llm.completed",
            purpose=purpose,
            model=completion.model,
            prompt=prompt_ref,
            duration_ms=round(duration * 1000, 1),
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            finish_reason=completion.finish_reason,
        )
        return completion
