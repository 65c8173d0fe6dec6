"""Settings of task extraction (design note 4) and of cost accounting, mixed into Settings."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, field_validator


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
    # Prices to turn tokens into cost: JSON {"model": [USD per 1M input, per 1M output]}.
    MODEL_PRICES: str = ""

    @property
    def task_model(self) -> str:
        """Return the model of the task call: TASK_MODEL, else the extraction model."""
        return self.TASK_MODEL or self.extraction_model  # type: ignore[attr-defined]

    @property
    def model_prices(self) -> dict[str, tuple[float, float]]:
        """Return MODEL_PRICES as {model: (USD per 1M input, per 1M output)}."""
        return parse_prices(self.MODEL_PRICES)

    @field_validator("MODEL_PRICES")
    @classmethod
    def _prices(cls, value: str) -> str:
        if value.strip():
            parse_prices(value)
        return value


def parse_prices(raw: str) -> dict[str, tuple[float, float]]:
    """Return {model: (USD per 1M input tokens, per 1M output tokens)}; raise ValueError."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
        prices = {str(model): (float(pair[0]), float(pair[1])) for model, pair in dict(data).items()}
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ValueError('MODEL_PRICES must be JSON like {"gpt-4o-mini": [0.15, 0.6]}') from err
    if any(p < 0 for pair in prices.values() for p in pair):
        raise ValueError("MODEL_PRICES must not be negative")
    return prices
