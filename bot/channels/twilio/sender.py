"""Messages sent through Twilio's Messages API (the twilio client's messages.create): the
replies of REPLY_MODE=rest, deferred replies and a person's replies during a handover, one
path for all. Outside the user's 24-hour window nothing is sent: the message is held for
when they write again, and the reopen template goes instead (docs/window.md).

Each goes from the number the user wrote to, with a StatusCallback (PUBLIC_BASE_URL +
STATUS_PATH) so that delivery failures come back (63016: outside WhatsApp's 24-hour window).
A 429 or a 5xx is tried once more; anything else is Twilio's answer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import structlog
from twilio.base.exceptions import TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client

from bot.channels.twilio.outbound import split_message
from bot.config import Settings
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import HELD_MESSAGES, OUTBOUND_FAILED, REST_SENDS
from bot.storage.activity import ActivityStore
from bot.storage.outbox import OutboxStore
from bot.storage.window import WindowStore

log = structlog.get_logger(__name__)

#: Where Twilio posts delivery status (routes.py), under PUBLIC_BASE_URL.
STATUS_PATH = "/whatsapp/status"
#: Seconds one Messages API call may take; a 429 or 5xx is tried once more after RETRY_S.
SEND_TIMEOUT_S = 10.0
RETRY_S = 1.0


def make_twilio_client(settings: Settings) -> Client:
    """The twilio REST client, reaching the API at TWILIO_API_BASE_URL (a stand-in in tests),
    with a timeout: a hung connection must not hold a reply thread for ever."""
    client = Client(settings.TWILIO_ACCOUNT_SID, settings.twilio_auth_token,
                    http_client=TwilioHttpClient(timeout=SEND_TIMEOUT_S))
    client.api.base_url = settings.TWILIO_API_BASE_URL.rstrip("/")
    client.messaging.base_url = settings.TWILIO_MESSAGING_BASE_URL.rstrip("/")  # typing indicators
    client.content.base_url = settings.TWILIO_CONTENT_BASE_URL.rstrip("/")  # the account's templates
    return client


#: What `send` answers for a message held outside the window, in place of Twilio's error code.
HELD = "held"
#: ...and for one the user's STOP forbids (outside the window, only the business would write first).
MESSAGES_OFF = "messages_off"
#: Twilio's error for free text outside WhatsApp's 24-hour window.
WINDOW_CLOSED = "63016"


@dataclass(frozen=True)
class Delivery:
    """What sending a reply came to: messages that went out, or held for later."""

    sent: int
    held: bool = False


class MessageSender:
    """Send one WhatsApp message through the Messages API, inside the user's window."""

    def __init__(self, client: Client, settings: Settings, window: WindowStore | None = None,
                 outbox: OutboxStore | None = None, activity: ActivityStore | None = None) -> None:
        self.client = client
        base = settings.PUBLIC_BASE_URL
        self.status_callback = f"{base}{STATUS_PATH}" if base else None
        self.window = window  # None: every message goes as it is (a process without Redis)
        self.outbox = outbox  # None: failures are only logged and counted
        self.activity = activity  # the console's overview counts failed deliveries
        self.reopen_sid = settings.TEMPLATE_REOPEN_SID

    def create(self, user: str, from_: str, body: str, content_sid: str | None = None,
               variables: dict[str, str] | None = None) -> object:
        """messages.create (text, or an approved template by its Content SID with its
        variables), tried once more after a 429 or a 5xx; raise what Twilio answered."""
        options: dict[str, str] = {"status_callback": self.status_callback} if self.status_callback else {}
        options.update({"content_sid": content_sid} if content_sid else {"body": body})
        if content_sid and variables:
            options["content_variables"] = json.dumps(variables, ensure_ascii=False)
        for attempt in (1, 2):
            try:
                return self.client.messages.create(from_=from_, to=f"whatsapp:{user}", **options)
            except TwilioRestException as err:
                if attempt == 2 or not (err.status == 429 or err.status >= 500):
                    raise
                log.warning("reply.send_retry", status=err.status)
                time.sleep(RETRY_S)
        raise AssertionError("unreachable")

    def held_instead(self, user: str, from_: str, text: str, kind: str) -> str | None:
        """Hold the message when the user's window is closed (and send the reopen template for
        the first one held); return HELD, MESSAGES_OFF when the user's STOP forbids even that
        (nothing is kept), or None: send it. Unknown (Redis unreachable): sent."""
        if self.window is None:
            return None
        try:
            state = self.window.state(user)
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="window", error=str(err))
            return None
        if state.open:
            return None
        if state.messages_off:
            log.info("message.not_sent", kind=kind, reason="messages_off")
            return MESSAGES_OFF
        return HELD if self.hold(user, from_, text, kind) else None

    def hold(self, user: str, from_: str, text: str, kind: str, why: str = "outside_window") -> bool:
        """Hold a message for the user's next message, and send the reopen template for the
        first one held; return whether it was held (never for a user who sent STOP)."""
        assert self.window is not None
        try:
            state = self.window.state(user)
            if state.messages_off:
                log.info("message.not_sent", kind=kind, reason="messages_off")
                return False
            count = self.window.hold(user, text, from_, kind)
            # Anything sent since the window closed was a template (a person's, a reminder's):
            # the user has one to answer already, and is not sent a second.
            answered = count == 1 and state.closes_at is not None and self.outbox is not None \
                and self.outbox.sent_since(user, None, None, state.closes_at, template=True) is not None
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="window", error=str(err))
            return False
        HELD_MESSAGES.labels(kind=kind).inc()
        log.info("message.held", kind=kind, held=count, reason=why)
        if count == 1 and self.reopen_sid and not answered:
            try:
                created = self.create(user, from_, "", content_sid=self.reopen_sid)
                log.info("message.reopen_sent", twilio_sid=getattr(created, "sid", ""))
            except Exception as err:  # logged; the held message still waits for the user
                log.error("message.reopen_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
        return True

    def refused(self, user: str, sid: str, code: str, kind: str = "") -> None:
        """Twilio says a message did not arrive: record it against the user, and for a 63016
        (outside the window) hold its text for their next message, with the reopen template."""
        OUTBOUND_FAILED.labels(code=code or "none").inc()
        if self.outbox is None:
            return
        try:
            if self.activity is not None:
                self.activity.delivery_failed(time.time(), code)
            sent = self.outbox.failed(user, sid, code, kind)
            if code == WINDOW_CLOSED and self.window is not None:
                self.window.closed(user)
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="outbox", error=str(err))
            return
        if code == WINDOW_CLOSED and sent and self.window is not None:
            self.hold(user, str(sent.get("from") or ""), str(sent.get("text") or ""), str(sent.get("kind") or "reply"),
                      why="63016")

    def _sent(self, user: str, created: object, from_: str, text: str, kind: str, template: bool = False) -> None:
        sid = str(getattr(created, "sid", "") or "")
        if self.outbox is not None and sid:
            try:
                self.outbox.sent(user, sid, text, from_, kind, template)
            except StoreUnavailable as err:
                log.warning("store.unavailable", stage="outbox", error=str(err))

    def deliver_held(self, user: str) -> int:
        """The user wrote (their window is open): send what was held for them, oldest first,
        once; return how many messages went out."""
        if self.window is None:
            return 0
        try:
            held = self.window.take_held(user)
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="held", error=str(err))
            return 0
        sent = 0
        for entry in held:
            sent += self.send_reply(user, str(entry.get("from") or ""), str(entry.get("text") or ""),
                                    kind=str(entry.get("kind") or "reply")).sent
        if held:
            log.info("message.held_delivered", held=len(held), sent=sent)
        return sent

    def send_reply(self, user: str, from_: str, reply: str, kind: str = "reply") -> Delivery:
        """Send a reply as one message per 1,600 characters, or hold it outside the window;
        return how many went out (a refusal or a network failure is logged and counted, and
        stops the rest)."""
        why = self.held_instead(user, from_, reply, kind)
        if why is not None:
            return Delivery(0, held=why == HELD)
        sent = 0
        for chunk in split_message(reply):
            try:
                created = self.create(user, from_, chunk)
            except Exception as err:  # the API refused, or the network failed: logged, counted
                REST_SENDS.labels(result="failed").inc()
                log.error("reply.send_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
                if isinstance(err, TwilioRestException) and err.code is not None:
                    self.refused(user, "", str(err.code), kind)
                break
            REST_SENDS.labels(result="sent").inc()
            self._sent(user, created, from_, chunk, kind)
            log.info("reply.sent", twilio_sid=getattr(created, "sid", ""))
            sent += 1
        return Delivery(sent)

    def send_first(self, user: str, from_: str, text: str, kind: str, template_sid: str | None,
                   variables: dict[str, str] | None = None) -> tuple[str, str]:
        """Send a message the business starts (a reminder): as text inside the user's window,
        else as the template with its variables; return (outcome, detail): ("sent", sid),
        ("messages_off", ""), ("undeliverable", "outside_window") with no template, or
        ("failed", Twilio's code). Raise StoreUnavailable (the window is unknown) and the
        network's errors, for the job's retry."""
        state = self.window.state(user) if self.window is not None else None
        if state is not None and state.messages_off:
            log.info("message.not_sent", kind=kind, reason="messages_off")
            return MESSAGES_OFF, ""
        inside = state is None or state.open
        if not inside and not template_sid:
            log.info("message.not_sent", kind=kind, reason="outside_window")
            return "undeliverable", "outside_window"
        try:
            created = (self.create(user, from_, text) if inside
                       else self.create(user, from_, "", content_sid=template_sid, variables=variables))
        except TwilioRestException as err:
            REST_SENDS.labels(result="failed").inc()
            log.error("message.send_failed", kind=kind, status=err.status, error_code=err.code)
            if err.code is None:
                raise
            self.refused(user, "", str(err.code), kind)
            return "failed", str(err.code)
        REST_SENDS.labels(result="sent").inc()
        self._sent(user, created, from_, text, kind, template=not inside)
        sid = str(getattr(created, "sid", "") or "")
        log.info("message.sent", kind=kind, template=not inside, twilio_sid=sid)
        return "sent", sid

    def send_template(self, user: str, from_: str, content_sid: str, variables: dict[str, str],
                      text: str = "") -> tuple[str | None, str | None]:
        """Send an approved template (a person's, from the console): WhatsApp delivers it
        inside or outside the window; never to a user who sent STOP, outside their window.
        Return as `send` does; `text` is what the user reads, kept in the outbox."""
        if self.window is not None:
            try:
                state = self.window.state(user)
            except StoreUnavailable as err:
                log.warning("store.unavailable", stage="window", error=str(err))
                state = None
            if state is not None and state.messages_off and not state.open:
                log.info("message.not_sent", kind="template", reason="messages_off")
                return None, MESSAGES_OFF
        return self._send_one(user, from_, text, "template", content_sid, variables)

    def send(self, user: str, from_: str, text: str) -> tuple[str | None, str | None]:
        """Send text (at most 1,600 characters) to the user from `from_` ("whatsapp:+…");
        return (the message's sid, None), (None, HELD) when it waits for the user's next
        message (outside the window), (None, MESSAGES_OFF) when the user's STOP forbids it,
        (None, Twilio's error code) when it was refused, or
        (None, None) when the API could not be reached."""
        why = self.held_instead(user, from_, text, "person")
        if why is not None:
            return None, why
        return self._send_one(user, from_, text, "person")

    def _send_one(self, user: str, from_: str, text: str, kind: str, content_sid: str | None = None,
                  variables: dict[str, str] | None = None) -> tuple[str | None, str | None]:
        """Send one message (text, or the template with its variables) as `send` answers; a
        refusal is recorded against the user, a network failure logged and counted."""
        try:
            created = self.create(user, from_, text, content_sid=content_sid, variables=variables)
        except TwilioRestException as err:
            REST_SENDS.labels(result="failed").inc()
            log.error("message.send_failed", kind=kind, status=err.status, error_code=err.code)
            if err.code is not None:
                self.refused(user, "", str(err.code), kind)
            return None, str(err.code) if err.code is not None else None
        except Exception as err:  # the network failed: logged, counted, said to the caller
            REST_SENDS.labels(result="failed").inc()
            log.error("message.send_failed", kind=kind, error=f"{type(err).__name__}: {str(err)[:200]}")
            return None, None
        REST_SENDS.labels(result="sent").inc()
        self._sent(user, created, from_, text, kind, template=content_sid is not None)
        sid = str(getattr(created, "sid", "") or "")
        log.info("message.sent", kind=kind, twilio_sid=sid)
        return sid or None, None


def make_message_sender(settings: Settings, window: WindowStore | None = None, outbox: OutboxStore | None = None,
                        activity: ActivityStore | None = None) -> MessageSender | None:
    """Build the sender of a person's replies (and of held messages), or None without
    TWILIO_ACCOUNT_SID (nothing can be sent by API then)."""
    if not settings.TWILIO_ACCOUNT_SID:
        return None
    if not settings.PUBLIC_BASE_URL:
        log.warning("message.no_status_callback", detail="set PUBLIC_BASE_URL to learn of failed deliveries")
    return MessageSender(make_twilio_client(settings), settings, window, outbox, activity)
