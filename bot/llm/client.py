"""The model client: Chat Completions through the openai SDK, errors turned into ours."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import structlog

from bot.config import Settings
from bot.exceptions import LLMUnavailable
from bot.llm.deadline import DeadlineExceeded, run_with_deadline
from bot.llm.sdk import lazy_client
from bot.observability.metrics import MODEL_TOKENS

if TYPE_CHECKING:
    import openai

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ToolCall:
    """One tool the model asked for: the call's id, the tool's name, its arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """One model answer and what it cost."""

    text: str
    finish_reason: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    duration_s: float
    tool_calls: tuple[ToolCall, ...] = ()


def retryable() -> tuple[type[Exception], ...]:
    """Return the errors worth another attempt: the request may well succeed a moment later."""
    import openai

    return (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


#: First pause between attempts; it doubles, with jitter.
BACKOFF_S = 0.25
#: An attempt shorter than this could not produce an answer: don't start one.
MIN_ATTEMPT_S = 0.3


def make_openai_client(settings: Settings) -> openai.OpenAI:
    """Build the SDK client (at its first use: bot/llm/sdk.py). Its own retries are off: they
    honour Retry-After for up to two minutes, far past Twilio's 15 s, so LLMClient retries
    against a deadline instead. Its transport ends a response that trickles past the timeout
    (bot/llm/transport.py)."""
    return lazy_client(api_key=settings.openai_api_key, base_url=settings.OPENAI_BASE_URL,
                       timeout=settings.LLM_TIMEOUT_S, max_retries=0, max_connections=1000, max_keepalive=100)


class LLMClient:
    """Ask one model for completions; every failure becomes LLMUnavailable."""

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        timeout_s: float = 5.0,
        max_retries: int = 1,
        deadline_s: float = 11.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.deadline_s = deadline_s
        self.sleep = sleep

    def _create(self, deadline: float, max_retries: int, **request: Any) -> Any:
        """Call the SDK, retrying retryable errors while the deadline allows."""
        import openai

        from bot.llm.transport import httpx

        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            budget = max(0.1, min(self.timeout_s, remaining))
            client = self.client.with_options(timeout=budget)
            try:
                try:  # a hard deadline per attempt: httpx's timeouts apply per phase
                    return run_with_deadline(lambda: client.chat.completions.create(**request), budget)
                except DeadlineExceeded:
                    raise openai.APITimeoutError(request=httpx.Request("POST", str(client.base_url))) from None
            except retryable() as err:
                pause = BACKOFF_S * (2**attempt) * (0.5 + random.random())
                left = deadline - time.monotonic() - pause
                if attempt >= max_retries or left < min(1.0, self.timeout_s):
                    raise
                log.info("llm.retry", attempt=attempt + 1, error=type(err).__name__, pause_ms=round(pause * 1000))
                self.sleep(pause)
                attempt += 1

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str,
        prompt_ref: str,
        max_tokens: int,
        model: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        deadline_s: float | None = None,
        max_retries: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """Return the model's completion of messages, or raise LLMUnavailable; retries included
        (max_retries, else the client's), within deadline_s when given (what is left of a
        webhook's time), else the client's. With `tools` (function definitions) the model may
        answer with tool calls instead of text (docs/tools.md)."""
        model = model or self.model
        budget = self.deadline_s if deadline_s is None else min(self.deadline_s, deadline_s)
        if budget < MIN_ATTEMPT_S:
            log.warning("llm.skipped", purpose=purpose, reason="no_time_left", budget_ms=round(budget * 1000))
            raise LLMUnavailable("no time left for the model before the deadline")
        deadline = time.monotonic() + budget
        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = response_format
        if temperature is not None:
            extra["temperature"] = temperature
        if tools:
            extra["tools"] = tools
            if tool_choice:
                extra["tool_choice"] = tool_choice
        started = time.perf_counter()
        import openai  # loaded with the client, at its first call (bot/llm/sdk.py)

        try:
            retries = self.max_retries if max_retries is None else max_retries
            response = self._create(deadline, retries, model=model, messages=messages, max_tokens=max_tokens, **extra)
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
            tool_calls=tuple(
                ToolCall(call.id, call.function.name, call.function.arguments or "{}")
                for call in (choice.message.tool_calls or ()) if getattr(call, "function", None) is not None
            ),
        )
        MODEL_TOKENS.labels(purpose=purpose, model=completion.model, kind="prompt").inc(completion.prompt_tokens)
        MODEL_TOKENS.labels(purpose=purpose, model=completion.model, kind="completion").inc(completion.completion_tokens)
        log.info(
            "llm.completed",
            purpose=purpose,
            model=completion.model,
            prompt=prompt_ref,
            duration_ms=round(duration * 1000, 1),
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            finish_reason=completion.finish_reason,
            tool_calls=len(completion.tool_calls),
        )
        return completion
