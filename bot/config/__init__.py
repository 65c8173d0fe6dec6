"""Settings, read once from the environment and validated at startup."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, TypeVar

from dotenv import dotenv_values
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.console import ConsoleSettings
from bot.config.deferred import DeferredSettings
from bot.config.embeddings import EmbeddingSettings
from bot.config.entities import EntitySettings
from bot.config.knowledge import KnowledgeSettings
from bot.config.tools import ToolsSettings
from bot.config.window import WindowSettings
from bot.config.reminders import ReminderSettings
from bot.config.media import MediaSettings
from bot.config.summaries import SummarySettings
from bot.config.tasks import TaskSettings
from bot.exceptions import ConfigError
Area = TypeVar("Area", bound=BaseModel)

#: The longest one model call may take, retries included (settings are checked against it);
#: inside a webhook it gets less when less is left of WEBHOOK_DEADLINE_S.
MODEL_DEADLINE_S = 11.0

#: A user id: an E.164 number with its +, as Twilio sends it after "whatsapp:".
E164_PATTERN = r"\+[1-9]\d{6,14}"
E164 = re.compile(f"^{E164_PATTERN}$")

#: Room kept in every prompt for the system prompt and message framing.
PROMPT_FRAME_TOKENS = 200

#: Phrases that mark a reply as a non-answer (docs/conversation.md). Lower case; matched as substrings.
DEFAULT_REPHRASE_PHRASES = (
    "please rephrase",
    "could you rephrase",
    "can you rephrase",
    "i didn't understand",
    "i did not understand",
    "i don't understand",
    "sorry, i'm having trouble",
    # Portuguese and Spanish (docs/languages.md)
    "pode reformular", "podes reformular", "não percebi", "não entendi", "nao percebi", "nao entendi",
    "puede reformular", "puedes reformular", "no entendí", "no he entendido", "no entiendo",
)

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"


class Settings(BaseSettings, SummarySettings, EntitySettings, TaskSettings, MediaSettings, DeferredSettings,
               ConsoleSettings, KnowledgeSettings, EmbeddingSettings, ToolsSettings, WindowSettings,
               ReminderSettings):
    """Every setting the bot reads; names are the environment variables."""

    # The environment wins, then .env (the operator's file), then .run/dev.env (where the
    # running `make run` is: its Redis, model server, port); of env files the last one wins.
    model_config = SettingsConfigDict(
        case_sensitive=True,
        extra="ignore",
        frozen=True,
        env_file=(".run/dev.env", ".env"),
        env_file_encoding="utf-8",
        # An empty value (TWILIO_AUTH_TOKEN= as copied from .env.example) is unset, so it
        # neither wins over .run/dev.env nor counts as given.
        env_ignore_empty=True,
    )

    # --- deployment -------------------------------------------------------------
    APP_ENV: Literal["development", "production"] = "development"
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # JSON logs in production, human-readable otherwise, unless set explicitly.
    LOG_JSON: bool | None = None

    # --- Twilio -----------------------------------------------------------------
    # Required by the web and worker processes (load_settings(need=...)); the CLI's read-only
    # commands run without it.
    TWILIO_AUTH_TOKEN: str | None = None
    # The public URL Twilio posts to, without the path (https://bot.example.com).
    # Twilio signs the URL it called; behind a TLS-terminating proxy the app sees
    # another one, so set this (or TRUST_FORWARDED_HEADERS) there.
    PUBLIC_BASE_URL: str | None = None
    TRUST_FORWARDED_HEADERS: bool = False
    # twiml: the reply is the webhook's answer (within Twilio's 15 s). rest: the webhook answers
    # at once and the reply goes out through Twilio's Messages API (slow models, long work).
    REPLY_MODE: Literal["twiml", "rest"] = "twiml"
    # The account the Messages API is called as (rest mode), with TWILIO_AUTH_TOKEN.
    TWILIO_ACCOUNT_SID: str | None = None
    # Where the twilio client reaches the REST API (a local stand-in in tests).
    TWILIO_API_BASE_URL: str = "https://api.twilio.com"

    # --- model ------------------------------------------------------------------
    # Optional when OPENAI_BASE_URL points at a server that needs no key (Ollama, vLLM...).
    OPENAI_API_KEY: str | None = None
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
    # User state (conversations, facts): one Redis, or any node of a Redis Cluster.
    REDIS_URL: str = "redis://127.0.0.1:6379/0"
    # Cluster mode: unset = ask REDIS_URL at startup (INFO cluster); true/false skips asking.
    REDIS_CLUSTER: bool | None = None
    # RQ's queues and job records, on a standalone Redis (RQ does not support Cluster).
    # Defaults to REDIS_URL; required when REDIS_URL is a cluster.
    QUEUE_REDIS_URL: str | None = None
    # Connect and socket timeout of each Redis read; a command against a Redis that stalls
    # costs at most 4 x this + 0.3 s (the connection's and the command's retry, measured), and
    # the webhook's deadline counts on that. Commands take well under a millisecond.
    REDIS_TIMEOUT_S: float = Field(default=0.5, ge=0.05, le=3.0)

    # --- the webhook's deadline ------------------------------------------------------
    # Everything one webhook request waits on (Redis with its retries, the redelivery wait,
    # every model attempt) fits in this; Twilio gives up at 15 s.
    WEBHOOK_DEADLINE_S: float = Field(default=14.0, ge=3.0, le=14.5)

    # --- conversation context (docs/conversation.md) --------------------------------------
    RECENT_PAIRS: int = Field(default=5, ge=1, le=50)
    # ...and no more than this many bytes of them (stored JSON; the newest pair always stays).
    # Older pairs leave for the summary: next to the system prompt, the memory block and the
    # summary, the 800-token prompt has room for about this much history anyway, and it keeps
    # a user at rest under 4 KB.
    RECENT_MAX_BYTES: int = Field(default=2000, ge=500)
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

    # chat_context and chat_pending expire this many days after the user's last message
    # (facts: FACTS_TTL_DAYS; redelivery records: DEDUP_WINDOW_S).
    CONTEXT_TTL_DAYS: int = Field(default=30, ge=1, le=3650)

    # --- the bot's own words (docs/languages.md) ------------------------------------------
    # The business's language: the bot's fixed replies are in the user's language (their
    # message's, else the last they wrote in), and in this one when nothing tells.
    BOT_LANGUAGE: Literal["en", "pt", "es"] = "en"
    # More whole messages that clear the conversation, besides the catalogs' ("start over",
    # "recomeçar", "empezar de nuevo"…; case and punctuation ignored), comma-separated.
    RESET_PHRASES: str = ""
    # More phrases that start a new topic (the old one is folded into the summary at once).
    TOPIC_SHIFT_PHRASES: str = ""

    # --- durable facts (docs/memory.md) ---------------------------------------------
    # Extract facts after every this many valid pairs (0 turns extraction off).
    EXTRACTION_INTERVAL: int = Field(default=1, ge=0, le=100)
    # Coalesced: at most one extraction in flight per user, run once the user has paused this
    # many seconds, or once EXTRACTION_MAX_PAIRS pairs wait, whichever comes first, over every
    # pair not yet read (a burst of 8 messages is one call). 0: after each interaction.
    EXTRACTION_IDLE_S: int = Field(default=20, ge=0, le=600)
    EXTRACTION_MAX_PAIRS: int = Field(default=8, ge=1, le=20)
    # A cheaper model may do; defaults to OPENAI_MODEL.
    EXTRACTION_MODEL: str | None = None
    # Facts below this confidence are neither stored nor injected (docs/memory.md: 0.7).
    EXTRACTION_CONFIDENCE: float = Field(default=0.7, ge=0, le=1)
    MAX_FACTS_PER_USER: int = Field(default=50, ge=1, le=500)
    # Rival values this close in confidence are shown flagged as a conflict.
    CONFLICT_MARGIN: float = Field(default=0.1, ge=0, le=1)
    # The PERSISTENT MEMORY block's share of MAX_PROMPT_TOKENS.
    MEMORY_MAX_TOKENS: int = Field(default=200, ge=50)
    # Durable facts expire this long after the user's last message (retention).
    FACTS_TTL_DAYS: int = Field(default=365, ge=1, le=3650)
    # Session-scope facts ("in Lisbon this week") live this long after the last message.
    SESSION_FACTS_TTL_HOURS: int = Field(default=24, ge=1, le=720)
    # JSON file of org facts loaded at startup: {"business_hours": "Mon-Fri 9-18", ...}.
    ORG_FACTS_FILE: Path | None = None
    # "delete my data" waits this long for the user's YES.
    ERASE_CONFIRM_S: int = Field(default=600, ge=30)

    # --- operators ----------------------------------------------------------------------
    # Bearer token for /admin/*; admin routes are disabled (404) when unset.
    ADMIN_TOKEN: str | None = Field(default=None, min_length=16)
    # Comma-separated +E164 numbers allowed to send "#reset +E164" on WhatsApp.
    OPERATOR_NUMBERS: str = ""

    # Key of the pseudonym that stands for a user in RQ job ids and RQ's logs (HMAC-SHA256).
    # Defaults to TWILIO_AUTH_TOKEN; set it to keep job ids stable across a token rotation.
    PSEUDONYM_SECRET: str | None = None

    # --- abuse and load -----------------------------------------------------------------
    # Messages answered per user per minute; past it one polite notice, then silence until
    # the minute passes (0: no limit).
    RATE_LIMIT_PER_MINUTE: int = Field(default=20, ge=0, le=10000)
    # Model calls in flight per web process; a message past it gets the busy reply at once.
    # Keep it below WEB_THREADS (Procfile, 32), so threads are left to answer that at once.
    MODEL_CONCURRENCY: int = Field(default=28, ge=1, le=1000)

    # --- redelivery ------------------------------------------------------------------
    # A MessageSid is remembered this long: a redelivery inside it is never answered twice,
    # however many messages came in between. Twilio redelivers within minutes, not hours.
    DEDUP_WINDOW_S: int = Field(default=900, ge=60, le=86400)
    # Twilio's retry horizon: a redelivery this soon gets the first reply again, in full;
    # later, the user has long had it, so an empty answer (and a log line).
    REDELIVERY_REPLY_S: int = Field(default=120, ge=0)
    # At most this many MessageSids per user inside the window (a flood cannot grow Redis).
    DEDUP_MAX_RECORDS: int = Field(default=100, ge=10, le=5000)
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
        if self.REPLY_MODE == "rest" and not (self.TWILIO_ACCOUNT_SID or "").startswith("AC"):
            raise ValueError("TWILIO_ACCOUNT_SID: REPLY_MODE=rest sends through the Messages API as this account (AC…)")
        if self.REDELIVERY_REPLY_S > self.DEDUP_WINDOW_S:
            raise ValueError("REDELIVERY_REPLY_S must not exceed DEDUP_WINDOW_S")
        room = self.MAX_PROMPT_TOKENS - PROMPT_FRAME_TOKENS
        if self.MEMORY_MAX_TOKENS + self.MAX_USER_MESSAGE_TOKENS > room:
            raise ValueError(
                f"MEMORY_MAX_TOKENS + MAX_USER_MESSAGE_TOKENS must stay within MAX_PROMPT_TOKENS - "
                f"{PROMPT_FRAME_TOKENS} (the system prompt and framing) = {room}"
            )
        if self.APP_ENV == "production":
            if self.MODEL_STANDIN:
                raise ValueError("MODEL_STANDIN: the canned stand-in model is refused in production")
            if self.CONTEXT_STRATEGY != "compact":
                raise ValueError("CONTEXT_STRATEGY: full_history is a benchmark baseline only")
        return self

    @field_validator("SUMMARY_RETRY_INTERVALS")
    @classmethod
    def _intervals(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(p.isdigit() for p in parts):
            raise ValueError("must be comma-separated whole seconds, e.g. 10,30,60")
        return ",".join(parts)

    @field_validator("OPERATOR_NUMBERS")
    @classmethod
    def _operators(cls, value: str) -> str:
        numbers = [n.strip() for n in value.split(",") if n.strip()]
        bad = [n for n in numbers if not E164.match(n)]
        if bad:
            raise ValueError(f"{len(bad)} entr{'y is' if len(bad) == 1 else 'ies are'} not +E164")
        return ",".join(numbers)

    @field_validator(
        "ORG_FACTS_FILE", "EXTRACTION_MODEL", "ENTITY_MODEL", "TASK_MODEL", "PSEUDONYM_SECRET", "TWILIO_AUTH_TOKEN", "OPENAI_API_KEY",
        "OPENAI_BASE_URL", "QUEUE_REDIS_URL", "REDIS_CLUSTER", "ADMIN_TOKEN", mode="before",
    )
    @classmethod
    def _empty_none(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def extraction_model(self) -> str:
        """Return the model fact extraction uses."""
        return self.EXTRACTION_MODEL or self.OPENAI_MODEL

    @property
    def redis_worst_s(self) -> float:
        """Return the longest one Redis command can take against a Redis that stalls: the
        connection and the command are each retried once (measured: 4 timeouts + 0.3 s)."""
        return 4 * self.REDIS_TIMEOUT_S + 0.3

    @property
    def pseudonym_secret(self) -> str:
        """Return the key of users' pseudonyms in job ids (load_settings checks there is one)."""
        return self.PSEUDONYM_SECRET or self.TWILIO_AUTH_TOKEN or ""

    @property
    def queue_redis_url(self) -> str:
        """Return the Redis of RQ's queues (REDIS_URL unless QUEUE_REDIS_URL is set)."""
        return self.QUEUE_REDIS_URL or self.REDIS_URL

    @property
    def twilio_auth_token(self) -> str:
        """Return the Twilio auth token (load_settings checks it is set where it is needed)."""
        return self.TWILIO_AUTH_TOKEN or ""

    @property
    def openai_api_key(self) -> str:
        """Return the API key; a server reached through OPENAI_BASE_URL may need none, but the
        openai client wants a value, which such a server ignores."""
        return self.OPENAI_API_KEY or "not-needed"

    def slice(self, area: type[Area]) -> Area:
        """Return one area's settings alone (bot/config/<area>.py), for a part that needs no more."""
        return area.model_construct(**{name: getattr(self, name) for name in area.model_fields})

    def missing(self, *needs: str) -> list[str]:
        """Return what `needs` (names of NEEDS) lacks in these settings, one line each."""
        return [f"{name}: {why}" for need in needs for name, why in [NEEDS[need]] if not _has(self, need)]

    @property
    def retry_intervals(self) -> list[int]:
        """Return the summary job's retry intervals in seconds."""
        return [int(p) for p in self.SUMMARY_RETRY_INTERVALS.split(",")]

    @property
    def operators(self) -> frozenset[str]:
        """Return the operator numbers."""
        return frozenset(n for n in self.OPERATOR_NUMBERS.split(",") if n)

    @property
    def rephrase_phrases(self) -> tuple[str, ...]:
        """Return the configured non-answer phrases, lower-cased."""
        return tuple(p.strip().lower() for p in self.REPHRASE_PHRASES.split(",") if p.strip())

    @property
    def log_json(self) -> bool:
        """Return whether logs are JSON lines."""
        return self.APP_ENV == "production" if self.LOG_JSON is None else self.LOG_JSON


#: What a process may need beyond the defaults, with the line that says why.
NEEDS = {
    "twilio": ("TWILIO_AUTH_TOKEN", "required: the webhook checks Twilio's signature with it"),
    "model": ("OPENAI_API_KEY", "required unless OPENAI_BASE_URL names a server that needs no key"),
    "pseudonym": ("PSEUDONYM_SECRET", "required, or TWILIO_AUTH_TOKEN: it keys users' pseudonyms in job ids"),
}
#: The web and worker processes need all of it.
SERVER_NEEDS = ("twilio", "model", "pseudonym")


#: Where a setting can come from, first match wins (Settings reads them in this order too).
SOURCES = ("environment", ".env", ".run/dev.env")


def lookup(name: str) -> tuple[str, str] | None:
    """Return (value, source) of a variable as the settings resolve it, or None when unset;
    also for what is not a setting (PORT, which `make run` records in .run/dev.env)."""
    if os.environ.get(name):
        return os.environ[name], "environment"
    for source in SOURCES[1:]:
        path = Path(source)
        value = dotenv_values(path).get(name) if path.is_file() else None
        if value:
            return value, source
    return None


def _has(settings: Settings, need: str) -> bool:
    if need == "twilio":
        return bool(settings.TWILIO_AUTH_TOKEN)
    if need == "model":
        return bool(settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL)
    return bool(settings.PSEUDONYM_SECRET or settings.TWILIO_AUTH_TOKEN)


def load_settings(
    env_files: bool = True, need: tuple[str, ...] = SERVER_NEEDS, **overrides: object
) -> Settings:
    """Read settings from the environment; raise ConfigError naming each bad variable, and
    each missing one of what `need` names (NEEDS; the CLI's Redis-only commands need none)."""
    try:
        if env_files:
            settings = Settings(**overrides)  # type: ignore[arg-type]
        else:
            settings = Settings(_env_file=None, **overrides)  # type: ignore[arg-type, call-arg]
    except ValidationError as err:
        problems = []
        for error in err.errors():
            name = ".".join(str(part) for part in error["loc"]) or "settings"
            problems.append(f"{name}: {error['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
    missing = settings.missing(*need)
    if missing:
        raise ConfigError("invalid configuration: " + "; ".join(missing))
    return settings
