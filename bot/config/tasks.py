"""Settings of task extraction (docs/tasks.md) and of cost accounting, mixed into Settings."""

from __future__ import annotations

import json
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field, field_validator


class Price(NamedTuple):
    """A model's price: USD per 1M input and output tokens, and per minute of audio."""

    input: float
    output: float
    per_minute: float = 0.0


class TaskSettings(BaseModel):
    """TASK_* and MODEL_PRICES settings; each is documented in .env.example and README."""

    # Compress each message, with the conversation, into a resolved task before the reply
    # (one more model call; history or memory left out of the reply prompt when not needed).
    TASK_EXTRACTION: Literal["off", "on"] = "off"
    # The model of the task call; defaults to EXTRACTION_MODEL (then OPENAI_MODEL).
    TASK_MODEL: str | None = None
    # All the task call may take, retries included (3 attempts at most); past it, the reply
    # goes ahead with the full context. Kept well inside Twilio's 15 s.
    TASK_DEADLINE_S: float = Field(default=3.0, ge=0.5, le=8.0)
    # Prices to turn tokens into cost: JSON {"model": [USD per 1M input, per 1M output]}, and
    # for speech models a price per minute of audio: {"whisper-1": {"per_minute": 0.006}}
    # (or all three: {"input": 1.25, "output": 5, "per_minute": 0}).
    MODEL_PRICES: str = ""

    @property
    def task_model(self) -> str:
        """Return the model of the task call: TASK_MODEL, else the extraction model."""
        return self.TASK_MODEL or self.extraction_model  # type: ignore[attr-defined]

    @property
    def model_prices(self) -> dict[str, Price]:
        """Return MODEL_PRICES as {model: Price(per 1M input, per 1M output, per minute)}."""
        return parse_prices(self.MODEL_PRICES)

    @field_validator("MODEL_PRICES")
    @classmethod
    def _prices(cls, value: str) -> str:
        if value.strip():
            parse_prices(value)
        return value


def _price(value: object) -> Price:
    """Read one model's price: [input, output] or {"input", "output", "per_minute"}."""
    if isinstance(value, dict):
        unknown = set(value) - {"input", "output", "per_minute"}
        if unknown or not value:
            raise ValueError(f"unknown price fields {sorted(unknown)}")
        return Price(float(value.get("input", 0)), float(value.get("output", 0)), float(value.get("per_minute", 0)))
    if isinstance(value, list) and len(value) == 2:
        return Price(float(value[0]), float(value[1]))
    raise ValueError("a price is [input, output] or an object")


def parse_prices(raw: str) -> dict[str, Price]:
    """Return {model: Price(USD per 1M input tokens, per 1M output tokens, per audio minute)};
    raise ValueError."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
        prices = {str(model): _price(value) for model, value in dict(data).items()}
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ValueError(
            'MODEL_PRICES must be JSON like {"gpt-4o-mini": [0.15, 0.6], "whisper-1": {"per_minute": 0.006}}'
        ) from err
    if any(p < 0 for pair in prices.values() for p in pair):
        raise ValueError("MODEL_PRICES must not be negative")
    return prices
