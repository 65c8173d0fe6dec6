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
from twilio.rest import Client

from bot.channels.twilio.sender import STATUS_PATH, MessageSender, make_twilio_client
from bot.config import Settings
from bot.conversation.messages import InboundMessage
from bot.conversation.pipeline import Pipeline
from bot.conversation.replies import BotWords
from bot.observability.metrics import REPLY_SECONDS
from bot.storage.activity import ActivityStore
from bot.storage.outbox import OutboxStore
from bot.storage.window import WindowStore

log = structlog.get_logger(__name__)

#: Outcomes whose reply was already sent, or will be, by another attempt.
NOT_OURS_TO_SEND = ("duplicate", "inflight")
#: Re-exported for the app factory and the routes (the sender module holds them).
__all__ = ["STATUS_PATH", "RestReplier", "make_twilio_client"]


class RestReplier:
    """Runs the pipeline off the request thread and sends its reply through the Messages API."""

    def __init__(self, pipeline: Pipeline, client: Client, settings: Settings, words: BotWords,
                 window: WindowStore | None = None, outbox: OutboxStore | None = None,
                 activity: ActivityStore | None = None) -> None:
        self.pipeline = pipeline
        self.words = words
        self.client = client
        self.sender = MessageSender(client, settings, window, outbox, activity)  # the same path as a person's replies
        self.status_callback = self.sender.status_callback
        if not self.status_callback:
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
            reply, status = self.words.for_message("fallback", msg.body), "failed"
        if status in NOT_OURS_TO_SEND:
            log.info("reply.not_sent", status=status)
            return
        sent = self.send(msg, reply)
        REPLY_SECONDS.observe(time.perf_counter() - started)
        log.info("webhook.replied", status=status, mode="rest", messages=sent)

    def send(self, msg: InboundMessage, reply: str) -> int:
        """Send the reply as one message per 1,600 characters; return how many went out."""
        return self.sender.send_reply(msg.user, msg.to, reply).sent

    def close(self) -> None:
        """Finish the replies started (a graceful stop; there is no backlog), then stop."""
        if not self._closed.is_set():
            self._closed.set()
            self.pool.shutdown(wait=True)
