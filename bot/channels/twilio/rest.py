"""REPLY_MODE=rest: the webhook answers at once with empty TwiML, and the reply is made in the
background and sent with Twilio's Messages API (the twilio client's messages.create).

The message goes through the same pipeline as in TwiML mode: claim, redelivery, storage and
the fallback are the same. What differs is only how the reply leaves: from the number the
user wrote to, split above 1,600 characters, with a StatusCallback so that failed and
undelivered messages (63016: outside the 24-hour window) are logged and counted.

A redelivery (or a copy still in flight) sends nothing: the first attempt sends the reply.
On a graceful stop (SIGTERM) the process finishes the replies it has started; a process
killed outright loses the ones in flight, which the user must send again.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import structlog
from twilio.base.exceptions import TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client

from bot.channels.twilio.outbound import split_message
from bot.config import Settings
from bot.conversation.messages import InboundMessage
from bot.conversation.pipeline import Pipeline
from bot.conversation.replies import FALLBACK_REPLY
from bot.observability.metrics import REPLY_SECONDS, REST_SENDS

log = structlog.get_logger(__name__)

#: Where Twilio posts delivery status (routes.py), under PUBLIC_BASE_URL.
STATUS_PATH = "/whatsapp/status"
#: Outcomes whose reply was already sent, or will be, by another attempt.
NOT_OURS_TO_SEND = ("duplicate", "inflight")
#: Seconds one Messages API call may take; a 429 or 5xx is tried once more after RETRY_S.
SEND_TIMEOUT_S = 10.0
RETRY_S = 1.0


def make_twilio_client(settings: Settings) -> Client:
    """The twilio REST client, reaching the API at TWILIO_API_BASE_URL (a stand-in in tests),
    with a timeout: a hung connection must not hold a reply thread for ever."""
    client = Client(settings.TWILIO_ACCOUNT_SID, settings.twilio_auth_token,
                    http_client=TwilioHttpClient(timeout=SEND_TIMEOUT_S))
    client.api.base_url = settings.TWILIO_API_BASE_URL.rstrip("/")
    return client


class RestReplier:
    """Runs the pipeline off the request thread and sends its reply through the Messages API."""

    def __init__(self, pipeline: Pipeline, client: Client, settings: Settings) -> None:
        self.pipeline = pipeline
        self.client = client
        base = settings.PUBLIC_BASE_URL
        self.status_callback = f"{base}{STATUS_PATH}" if base else None
        if not base:
            log.warning("reply.no_status_callback", detail="set PUBLIC_BASE_URL to learn of failed deliveries")
        # As many replies in the making as model calls allowed, and a few for the busy answers;
        # never a backlog: past that, the webhook answers busy itself (load shedding).
        self.capacity = settings.MODEL_CONCURRENCY + 4
        self.pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="reply")
        self._lock = threading.Lock()
        self._in_flight = 0
        self._closed = threading.Event()

    def submit(self, msg: InboundMessage, started: float) -> bool:
        """Make and send the reply in the background, with this request's log context;
        False (nothing started) when every reply thread is taken."""
        with self._lock:
            if self._closed.is_set() or self._in_flight >= self.capacity:
                return False
            self._in_flight += 1
        context = contextvars.copy_context()
        self.pool.submit(context.run, self._run, msg, started)
        return True

    def _run(self, msg: InboundMessage, started: float) -> None:
        try:
            self._answer(msg, started)
        except Exception:  # never lost silently in a future nobody reads
            log.exception("reply.failed")
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, msg: InboundMessage, started: float) -> None:
        try:
            outcome = self.pipeline.handle(msg)
            reply, status = outcome.reply, outcome.status
        except Exception:
            log.exception("webhook.failed")
            reply, status = FALLBACK_REPLY, "failed"
        if status in NOT_OURS_TO_SEND:
            log.info("reply.not_sent", status=status)
            return
        sent = self.send(msg, reply)
        REPLY_SECONDS.observe(time.perf_counter() - started)
        log.info("webhook.replied", status=status, mode="rest", messages=sent)

    def send(self, msg: InboundMessage, reply: str) -> int:
        """Send the reply as one message per 1,600 characters; return how many went out."""
        sent = 0
        for chunk in split_message(reply):
            options = {"status_callback": self.status_callback} if self.status_callback else {}
            try:
                created = self._create(msg, chunk, options)
            except Exception as err:  # the API refused, or the network failed: logged, counted
                REST_SENDS.labels(result="failed").inc()
                log.error("reply.send_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
                break
            REST_SENDS.labels(result="sent").inc()
            log.info("reply.sent", twilio_sid=created.sid)
            sent += 1
        return sent

    def _create(self, msg: InboundMessage, chunk: str, options: dict[str, str]) -> object:
        """messages.create, tried once more after a 429 or a 5xx."""
        for attempt in (1, 2):
            try:
                return self.client.messages.create(from_=msg.to, to=f"whatsapp:{msg.user}", body=chunk, **options)
            except TwilioRestException as err:
                if attempt == 2 or not (err.status == 429 or err.status >= 500):
                    raise
                log.warning("reply.send_retry", status=err.status)
                time.sleep(RETRY_S)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Finish the replies started (a graceful stop; there is no backlog), then stop."""
        if not self._closed.is_set():
            self._closed.set()
            self.pool.shutdown(wait=True)
