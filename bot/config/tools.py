"""Settings of the business's tools (docs/tools.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ToolsSettings(BaseModel):
    """TOOLS_* settings; each is documented in .env.example and docs/configuration.md."""

    # The business's OpenAPI 3.0/3.1 document: a file path or an http(s) URL, JSON or YAML.
    # Unset: no tools.
    TOOLS_OPENAPI: str | None = None
    # The origin and base path the tools are called on, when not the document's servers[0].url.
    TOOLS_BASE_URL: str | None = None
    # One header sent with every tool call, to that origin only: "Authorization: Bearer …".
    TOOLS_AUTH_HEADER: str | None = None
    # Each call's whole time, redirects and reading included (a WhatsApp reply is waiting).
    TOOLS_TIMEOUT_S: float = Field(default=5.0, gt=0, le=30)
    # The largest answer read; a longer one is refused (the model would not read it anyway).
    TOOLS_MAX_RESPONSE_BYTES: int = Field(default=256 * 1024, ge=1024, le=16 * 1024 * 1024)
    # Model rounds per message: the model, its tool calls' results, the model again (at most).
    TOOLS_MAX_ROUNDS: int = Field(default=3, ge=1, le=6)
    # How long a proposed write waits for the user's yes before it is dropped.
    TOOLS_CONFIRM_TTL_S: int = Field(default=300, ge=30, le=86_400)
    # Tokens of the tools' answers that reach the model, for one message (the rest is cut, and said).
    TOOLS_RESULT_MAX_TOKENS: int = Field(default=600, ge=50, le=4_000)
    # A tool that failed this many times in a row is left out for TOOLS_BREAKER_PAUSE_S.
    TOOLS_BREAKER_FAILURES: int = Field(default=3, ge=1, le=100)
    TOOLS_BREAKER_PAUSE_S: float = Field(default=60.0, ge=1, le=3_600)
