"""The business's own API as tools the reply model may call (docs/tools.md): the OpenAPI
document read into tools (openapi.py) and the calls sent on its one origin (caller.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.tools.openapi import ToolBook


def load_tool_book(settings: Settings) -> ToolBook | None:
    """Return the business's tools from TOOLS_OPENAPI, or None when it is unset; raise
    ToolsConfigError when the document cannot be read or is not valid."""
    if not settings.TOOLS_OPENAPI:
        return None
    from bot.tools.caller import fetch_document
    from bot.tools.openapi import read_document, tool_book

    document = read_document(settings.TOOLS_OPENAPI, fetch=lambda url: fetch_document(
        url, timeout_s=settings.TOOLS_TIMEOUT_S, auth_header=settings.TOOLS_AUTH_HEADER))
    return tool_book(document, settings.TOOLS_BASE_URL)
