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
