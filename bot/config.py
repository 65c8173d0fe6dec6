"""Settings, read once from the environment and validated at startup."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.exceptions import ConfigError

#: Twilio abandons a webhook request after 15 s; the model budget must leave room
#: for Redis work and the HTTP round trip, so retries must finish inside this.
MODEL_DEADLINE_S = 11.0

#: Phrases that mark a reply as a non-answer (design note 1). Lower case; matched as substrings.
DEFAULT_REPHRASE_PHRASES = (
    "please rephrase",
    "could you rephrase",
    "can you rephrase",
    "i didn't understand",
    "i did not understand",
    "i don't understand",
    "sorry, i'm having trouble",
)

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


class Settings(BaseSettings):
    """Every setting the bot reads; names are the environment variables."""

    # The environment wins; .env is the operator's file, .run/dev.env is what `make run` started.
    model_config = SettingsConfigDict(
        case_sensitive=True,
        extra="ignore",
        frozen=True,
        env_file=(".env", ".run/dev.env"),
        env_file_encoding="utf-8",
    )

    # --- deployment -------------------------------------------------------------
    APP_ENV: Literal["development", "production"] = "development"
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # JSON logs in production, human-readable otherwise, unless set explicitly.
    LOG_JSON: bool | None = None

    # --- Twilio -----------------------------------------------------------------
    TWILIO_AUTH_TOKEN: str = Field(min_length=1)
    # The public URL Twilio posts to, without the path (https://bot.example.com).
    # Twilio signs the URL it called; behind a TLS-terminating proxy the app sees
    # another one, so set this (or TRUST_FORWARDED_HEADERS) there.
    PUBLIC_BASE_URL: str | None = None
    TRUST_FORWARDED_HEADERS: bool = False

    # --- model ------------------------------------------------------------------
    OPENAI_API_KEY: str = Field(min_length=1)
    OPENAI_BASE_URL: str | None = None
    OPENAI_MODEL: str = "gpt-4o-mini"
    # Per attempt; with retries the whole call must stay under MODEL_DEADLINE_S.
    LLM_TIMEOUT_S: float = Field(default=5.0, gt=0)
    LLM_MAX_RETRIES: int = Field(default=1, ge=0, le=3)
    # Room for the answer; WhatsApp messages are short, 400 tokens is ~1600 chars.
    REPLY_MAX_TOKENS: int = Field(default=400, ge=16)
    # Set by `make run` when it starts the canned stand-in model; refused in production.
    MODEL_STANDIN: bool = False

    # --- Redis ------------------------------------------------------------------
    REDIS_URL: str = "redis://127.0.0.1:6379/0"

    # --- conversation context (design note 1) --------------------------------------
    RECENT_PAIRS: int = Field(default=5, ge=1, le=50)
    SUMMARY_EVERY_N_PAIRS: int = Field(default=10, ge=1, le=100)
    # A pair shorter than this (user + assistant characters) is small talk, not context.
    MIN_PAIR_CHARS: int = Field(default=50, ge=0)
    MAX_PROMPT_TOKENS: int = Field(default=800, ge=200)
    # A user message longer than this is cut for the prompt (it is 5000 chars at worst).
    MAX_USER_MESSAGE_TOKENS: int = Field(default=300, ge=50)
    # Comma-separated, lower case; a reply containing one is not stored.
    REPHRASE_PHRASES: str = ",".join(DEFAULT_REPHRASE_PHRASES)
    # Store "[Image received]" style placeholders for media instead of rejecting them.
    MEDIA_PLACEHOLDERS: bool = False
    # `compact` is the product; `full_history` is the naive baseline the benchmark compares with.
    CONTEXT_STRATEGY: Literal["compact", "full_history"] = "compact"

    # Every per-user key expires this many days after the user's last message.
    CONTEXT_TTL_DAYS: int = Field(default=30, ge=1, le=3650)

    # --- redelivery ------------------------------------------------------------------
    # How many of a user's latest MessageSids are remembered to answer redeliveries.
    DEDUP_KEEP: int = Field(default=20, ge=1, le=500)
    # How long a redelivery waits for the first attempt, still in flight, to finish.
    DEDUP_WAIT_S: float = Field(default=10.0, ge=0)

    PROMPTS_DIR: Path = DEFAULT_PROMPTS_DIR

    @field_validator("PUBLIC_BASE_URL")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_budget_and_production(self) -> "Settings":
        worst = self.LLM_TIMEOUT_S * (self.LLM_MAX_RETRIES + 1)
        if worst > MODEL_DEADLINE_S:
            raise ValueError(
                f"LLM_TIMEOUT_S x (LLM_MAX_RETRIES + 1) = {worst:g}s exceeds {MODEL_DEADLINE_S:g}s;"
                " Twilio gives up on a webhook after 15s"
            )
        if self.APP_ENV == "production":
            if self.MODEL_STANDIN:
                raise ValueError("MODEL_STANDIN: the canned stand-in model is refused in production")
            if self.CONTEXT_STRATEGY != "compact":
                raise ValueError("CONTEXT_STRATEGY: full_history is a benchmark baseline only")
        return self

    @property
    def rephrase_phrases(self) -> tuple[str, ...]:
        """Return the configured non-answer phrases, lower-cased."""
        return tuple(p.strip().lower() for p in self.REPHRASE_PHRASES.split(",") if p.strip())

    @property
    def log_json(self) -> bool:
        """Return whether logs are JSON lines."""
        return self.APP_ENV == "production" if self.LOG_JSON is None else self.LOG_JSON


def load_settings(env_files: bool = True, **overrides: object) -> Settings:
    """Read settings from the environment; raise ConfigError naming each bad variable."""
    try:
        if env_files:
            return Settings(**overrides)  # type: ignore[arg-type]
        return Settings(_env_file=None, **overrides)  # type: ignore[arg-type, call-arg]
    except ValidationError as err:
        problems = []
        for error in err.errors():
            name = ".".join(str(part) for part in error["loc"]) or "settings"
            problems.append(f"{name}: {error['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
