"""WhatsApp's typing indicator for a deferred message (docs/deferred.md): Twilio's Typing
Indicators resource (Messaging v2, public beta) marks the inbound message read and shows
"typing…" until the reply arrives, or for 25 s; it is sent again every TYPING_REFRESH_S
while the work runs, up to TYPING_MAX_S. A failed indicator is logged and counted, never in
the reply's way."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import structlog
from twilio.rest import Client

from bot.config.deferred import TYPING_REFRESH_S
from bot.observability.metrics import TYPING_INDICATORS

log = structlog.get_logger(__name__)


class TypingIndicator:
    """Keeps "typing…" up for one inbound message while its reply is being made."""

    def __init__(self, client: Client, max_s: float, refresh_s: float = TYPING_REFRESH_S) -> None:
        self.client = client
        self.max_s = max_s
        self.refresh_s = refresh_s

    @contextmanager
    def shown(self, message_sid: str) -> Iterator[None]:
        """Show the indicator now and keep it up until the block ends (or TYPING_MAX_S)."""
        if self.max_s <= 0:
            yield
            return
        stop = threading.Event()
        keeper = threading.Thread(target=self._keep, args=(message_sid, stop), name="typing", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()

    def _keep(self, message_sid: str, stop: threading.Event) -> None:
        started = time.monotonic()
        while not stop.is_set():
            self.send(message_sid)
            left = self.max_s - (time.monotonic() - started)
            if left <= self.refresh_s or stop.wait(self.refresh_s):
                return

    def send(self, message_sid: str) -> bool:
        """Send one typing indicator; return whether Twilio took it."""
        try:
            self.client.messaging.v2.typing_indicator.create(channel="whatsapp", message_id=message_sid)
        except Exception as err:  # the beta API refused, or the network failed: the reply goes on
            TYPING_INDICATORS.labels(outcome="failed").inc()
            log.warning("typing.failed", error=f"{type(err).__name__}: {str(err)[:200]}")
            return False
        TYPING_INDICATORS.labels(outcome="sent").inc()
        log.debug("typing.sent")
        return True
