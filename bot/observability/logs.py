"""Structured logging: dotted events, masked phone numbers, no bodies at info level."""

from __future__ import annotations

import logging
import re
import sys

import structlog

#: An E.164 number (with or without the whatsapp: prefix) inside any logged string.
_PHONE = re.compile(r"\+\d{7,15}")


def mask_phone(value: str | None) -> str:
    """Mask a phone number, keeping the country prefix and the last two digits."""
    if not value:
        return "-"
    number = value.removeprefix("whatsapp:")
    digits = number.lstrip("+")
    if len(digits) <= 4:
        return "***"
    return f"+{digits[:2]}{'*' * (len(digits) - 4)}{digits[-2:]}"


#: The password part of a URL (redis://user:secret@host, rediss://:secret@host).
_URL_PASSWORD = re.compile(r"(?<=://)([^:/@]*):([^@/]+)@")


def mask_url(url: str) -> str:
    """Return a URL with its password masked, for banners and logs."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:***@", url)


def _mask_phones_in_event(_logger: object, _method: str, event: dict) -> dict:
    """Mask anything that looks like a phone number in string fields, as a safety net."""
    for key, value in event.items():
        if key == "event" or not isinstance(value, str):
            continue
        if _PHONE.search(value):
            event[key] = _PHONE.sub(lambda m: mask_phone(m.group(0)), value)
    return event


_configured: tuple[str, bool] | None = None


def configure_logging(level: str = "INFO", json: bool = False) -> None:
    """Configure structlog for the process; a repeat call with the same settings is a no-op."""
    global _configured
    if _configured == (level, json):
        return
    _configured = (level, json)
    renderer: structlog.types.Processor
    if json:
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Exceptions become text first, so the masking below sees their messages too.
            structlog.processors.format_exc_info,
            _mask_phones_in_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
