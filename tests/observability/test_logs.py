"""Logs through the configured processors: numbers masked, exception text included."""

from __future__ import annotations

import structlog

from bot.observability import logs


def test_numbers_in_exception_text_are_masked(capsys) -> None:  # type: ignore[no-untyped-def]
    logs._configured = None  # noqa: SLF001 - configure afresh for this test
    logs.configure_logging("INFO", json=True)
    try:
        raise ValueError("could not reach whatsapp:+14155550100 or +447700900123")
    except ValueError:
        structlog.get_logger("test").exception("job.failed")
    out = capsys.readouterr().err
    assert "job.failed" in out and "ValueError" in out
    assert "14155550100" not in out and "447700900123" not in out
    assert "+14*******00" in out
    logs._configured = None  # noqa: SLF001


def test_each_request_starts_a_fresh_log_context(send, client) -> None:  # type: ignore[no-untyped-def]
    """Threads are reused: a page served after a webhook call must not log that call's user."""
    send("Where should I stay in Lisbon for a week in May?")
    assert "message_sid" in structlog.contextvars.get_contextvars()
    client.get("/healthz")
    fields = structlog.contextvars.get_contextvars()
    assert "message_sid" not in fields and "user" not in fields and fields["request_id"]
