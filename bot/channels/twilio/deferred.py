"""Deferred replies (docs/deferred.md): a message whose work cannot be promised inside
Twilio's webhook is acknowledged at once (empty TwiML) and answered by a worker through the
Messages API, with a typing indicator while it works.

- Deferred: every voice note; a photo when the download and the vision call together could
  outlast the webhook (MEDIA_FETCH_TIMEOUT_S plus the model's worst case, against
  WEBHOOK_DEADLINE_S); and any message of a user whose deferred messages are still being
  answered, so replies keep the order the messages came in. Typed text otherwise stays on
  the webhook's fast path.
- One job per user answers their queue (bot/storage/deferred.py) oldest first, each message
  through the same pipeline as the webhook's, with DEFERRED_TURN_S instead of the webhook's
  deadline: the claim, the stored pair, the summary trigger, extraction and usage are the
  webhook path's own.
- Exactly once: a redelivery is 'known' and starts nothing. A job redone after its worker
  died claims the message with the same token, so it takes its claim back at once (a copy
  still running commits nothing twice: the commit with one token is written once), or finds
  it answered and sends the stored reply; a reply whose sending was already marked is not
  sent again. After an erase the job finds its hold gone and sends nothing.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import structlog

from bot.channels.twilio.sender import MessageSender
from bot.channels.twilio.typing import TypingIndicator
from bot.config import MODEL_DEADLINE_S, Settings
from bot.config.media import HTTP_MARGIN_S
from bot.conversation.messages import InboundMessage, MediaItem, Outcome
from bot.conversation.pipeline import Pipeline
from bot.conversation.replies import BotWords
from bot.exceptions import StoreUnavailable
from bot.jobs.queue import DEFERRED_REPLY, JobQueue
from bot.media.location import Location
from bot.observability.metrics import DEFERRED, DEFERRED_SECONDS
from bot.storage.deferred import ALREADY_SENT, SEND, DeferredStore, Queued
from bot.storage.redelivery import INFLIGHT_LEASE_S

log = structlog.get_logger(__name__)

#: A message found claimed by an attempt that died is asked again this often until the
#: claim's lease (INFLIGHT_LEASE_S) runs out and it can be taken over.
INFLIGHT_POLL_S = 1.0


def deferred_kind(msg: InboundMessage, settings: Settings) -> str | None:
    """Return why this message cannot be promised inside the webhook ("voice", "photo",
    "tools"), or None when it can."""
    model_worst = min(settings.LLM_TIMEOUT_S * (settings.LLM_MAX_RETRIES + 1), MODEL_DEADLINE_S)
    if not msg.media:
        # With the business's tools a reply may take two model rounds and a call between them
        # (docs/tools.md): when that cannot fit in the webhook's time, a worker answers.
        tools_worst = 2 * model_worst + settings.TOOLS_TIMEOUT_S
        if settings.TOOLS_OPENAPI and tools_worst > settings.WEBHOOK_DEADLINE_S - HTTP_MARGIN_S:
            return "tools"
        return None
    family = msg.media[0].family
    if family == "audio" and settings.VOICE:
        return "voice"
    if family == "image" and settings.VISION:
        if settings.MEDIA_FETCH_TIMEOUT_S + model_worst > settings.WEBHOOK_DEADLINE_S - HTTP_MARGIN_S:
            return "photo"
    return None


def encode(msg: InboundMessage, kind: str) -> dict[str, Any]:
    """Return the message as the deferred queue keeps it."""
    return {"user": msg.user, "body": msg.body, "to": msg.to, "profile": msg.profile_name, "kind": kind,
            "media": [[m.content_type, m.ref] for m in msg.media],
            "location": asdict(msg.location) if msg.location else None, "at": time.time()}


def decode(sid: str, data: dict[str, Any]) -> InboundMessage:
    """Return the message the queue kept."""
    location = data.get("location")
    return InboundMessage(
        user=str(data["user"]), sid=sid, body=str(data.get("body", "")),
        media=tuple(MediaItem(str(t), str(r)) for t, r in data.get("media") or []),
        location=Location(**location) if isinstance(location, dict) else None,
        profile_name=str(data.get("profile", "")), to=str(data.get("to", "")),
        received_at=float(data.get("at") or 0.0),
    )


class Deferral:
    """The webhook's side: decide, queue, and start the user's job when none runs."""

    def __init__(self, settings: Settings, store: DeferredStore, jobs: JobQueue) -> None:
        self.settings = settings
        self.store = store
        self.jobs = jobs

    def offer(self, msg: InboundMessage) -> bool:
        """Queue the message for a worker when it must be; False leaves it to the webhook
        (typed text with nothing queued before it, or Redis unreachable)."""
        kind = deferred_kind(msg, self.settings)
        try:
            if kind is None:
                if not self.store.waiting(msg.user):
                    return False
                kind = "behind"  # a reply must not overtake the one being made
            pushed = self.store.push(msg.user, msg.sid, encode(msg, kind))
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="defer", error=str(err))
            return False
        if pushed.status == "start":
            try:
                self.jobs.enqueue(DEFERRED_REPLY, msg.user, pushed.token, timeout_s=self._job_timeout())
            except Exception as err:  # the queue's Redis: the next deferred message starts a job
                self.store.release(msg.user, pushed.token)
                log.error("deferred.enqueue_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
        DEFERRED.labels(kind=kind, outcome="queued" if pushed.status != "known" else "known").inc()
        log.info("deferred.queued", kind=kind, status=pushed.status)
        return True

    def _job_timeout(self) -> int:
        """Seconds one job may run: a few deferred messages in a row, each within its turn."""
        return int(4 * self.settings.DEFERRED_TURN_S)


class DeferredReplies:
    """The worker's side: answer one user's deferred messages in order, each reply once."""

    def __init__(self, pipeline: Pipeline, store: DeferredStore, sender: MessageSender,
                 typing: TypingIndicator, words: BotWords) -> None:
        self.pipeline = pipeline
        self.words = words
        self.store = store
        self.sender = sender
        self.typing = typing

    def answer(self, user: str, token: str) -> int:
        """Answer the user's queue until it is empty (or no longer this job's); return how
        many replies went out."""
        sent = 0
        while True:
            head = self.store.head(user)
            if head is None:
                if self.store.pop(user, None, token) == "more":  # one came in meanwhile
                    continue
                return sent
            msg = decode(head.sid, head.data)
            structlog.contextvars.bind_contextvars(message_sid=msg.sid)
            if head.sending:  # a job before this one died after marking it: maybe sent
                log.warning("deferred.not_sent", reason="maybe_sent_before")
                DEFERRED.labels(kind=head.data.get("kind", ""), outcome="not_sent").inc()
            else:
                with self.typing.shown(msg.sid):
                    outcome = self._handle(msg, f"{token}.{msg.sid[-12:]}")
                sent += self._deliver(user, token, head, msg, outcome)
            if self.store.pop(user, msg.sid, token) == "lost":
                log.info("deferred.stopped", reason="hold_lost")
                return sent

    def _handle(self, msg: InboundMessage, claim_token: str) -> Outcome:
        """Run the message through the pipeline with this job's own claim token (this job
        redone takes its claim back at once); one claimed by another job that died is asked
        again until that claim's lease runs out."""
        give_up = time.monotonic() + INFLIGHT_LEASE_S + 5
        while True:
            try:
                outcome = self.pipeline.handle(msg, claim_token)
            except Exception:
                log.exception("deferred.failed")
                return Outcome(reply=self.words.for_message("fallback", msg.body), status="failed")
            if outcome.status != "inflight" or time.monotonic() > give_up:
                return outcome
            time.sleep(INFLIGHT_POLL_S)

    def _deliver(self, user: str, token: str, head: Queued, msg: InboundMessage, outcome: Outcome) -> int:
        """Send the reply unless it must not go (marked before, erased); return messages sent."""
        kind = str(head.data.get("kind", ""))
        if not outcome.reply or outcome.status == "inflight":
            # a handover answers nothing on purpose; a claim still in flight at the end is trouble
            level = log.warning if outcome.status in ("inflight", "failed", "duplicate") else log.info
            level("deferred.not_sent", reason=f"no_reply_{outcome.status}")
            DEFERRED.labels(kind=kind, outcome="not_sent").inc()
            return 0
        mark = self.store.mark_sending(user, msg.sid, token)
        if mark != SEND:
            reason = "maybe_sent_before" if mark == ALREADY_SENT else "erased"
            log.info("deferred.not_sent", reason=reason)
            DEFERRED.labels(kind=kind, outcome="erased" if reason == "erased" else "not_sent").inc()
            return 0
        delivery = self.sender.send_reply(msg.user, msg.to, outcome.reply)
        sent = delivery.sent
        waited = time.time() - float(head.data.get("at", time.time()))
        DEFERRED.labels(kind=kind, outcome="answered" if sent else "held" if delivery.held else "failed").inc()
        DEFERRED_SECONDS.observe(max(0.0, waited))
        log.info("deferred.replied", kind=kind, status=outcome.status, messages=sent, waited_ms=round(waited * 1000))
        return sent
