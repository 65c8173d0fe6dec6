"""POST /whatsapp: Twilio's webhook. Checks the request, hands the message to the pipeline,
answers with TwiML. Knows nothing of context."""

from __future__ import annotations

import time
import uuid

import structlog
from flask import Blueprint, Response, current_app, request

from bot.channels.twilio import outbound
from bot.channels.twilio.inbound import parse_inbound, signature_ok
from bot.conversation.catalog import normalize
from bot.conversation.pipeline import Pipeline
from bot.conversation.steps.load_shed import shed
from bot.config import E164
from bot.exceptions import InvalidInbound, StoreUnavailable
from bot.observability.logs import mask_phone
from bot.channels.twilio.sender import STATUS_PATH
from bot.observability.metrics import DELIVERY_FAILURES, REPLY_SECONDS

log = structlog.get_logger(__name__)

bp = Blueprint("webhook", __name__)

#: Set on the empty answer to a deferred message ("deferred"), and on a message a person is to
#: answer ("handover").
DEFERRED_HEADER = "X-Bot-Reply"


def _twiml(body: str, status: int = 200) -> Response:
    return Response(body, status=status, mimetype="application/xml")


@bp.post("/whatsapp")
def whatsapp() -> Response:
    """Answer one inbound WhatsApp message with TwiML."""
    started = time.perf_counter()
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(
        request_id=request.headers.get("X-Request-Id") or uuid.uuid4().hex[:16],
        user=mask_phone(request.form.get("From")),
    )
    validator = current_app.extensions["bot.validator"]
    if not signature_ok(request, validator, current_app.config["BOT_SETTINGS"].PUBLIC_BASE_URL):
        log.warning("webhook.rejected", reason="bad_signature", url_host=request.host)
        return Response("invalid signature\n", status=403, mimetype="text/plain")
    try:
        msg = parse_inbound(request.form)
    except InvalidInbound as err:
        log.warning("webhook.rejected", reason="bad_form", detail=str(err))
        return Response(f"bad request: {err}\n", status=400, mimetype="text/plain")
    structlog.contextvars.bind_contextvars(message_sid=msg.sid)
    log.info("webhook.received", chars=len(msg.body), media=len(msg.media),
             media_type=msg.media[0].content_type if msg.media else None, location=msg.has_location)
    log.debug("webhook.body", body=msg.body)
    _window_opened(msg.user, msg.body)

    deferral = current_app.extensions.get("bot.deferral")
    if deferral is not None and deferral.offer(msg):  # a worker answers it (docs/deferred.md)
        REPLY_SECONDS.observe(time.perf_counter() - started)
        response = _twiml(outbound.render(""))
        response.headers[DEFERRED_HEADER] = "deferred"  # for tools (`chat` waits for the reply); Twilio ignores it
        return response
    replier = current_app.extensions.get("bot.replier")
    if replier is not None:  # REPLY_MODE=rest: answer now, reply through the Messages API
        if replier.submit(msg, started):
            return _twiml(outbound.render(""))
        shed(mode="rest")
        return _twiml(outbound.render(current_app.extensions["bot.words"].for_message("busy", msg.body)))
    pipeline: Pipeline = current_app.extensions["bot.pipeline"]
    try:
        outcome = pipeline.handle(msg)
    except Exception:
        log.exception("webhook.failed")
        return _twiml(outbound.render(current_app.extensions["bot.words"].for_message("fallback", msg.body)))
    elapsed = time.perf_counter() - started
    REPLY_SECONDS.observe(elapsed)
    log.info(
        "webhook.replied",
        status=outcome.status,
        reason=outcome.reason,
        stored=outcome.stored,
        duration_ms=round(elapsed * 1000, 1),
        model_ms=round(outcome.model_s * 1000, 1),
    )
    response = _twiml(outbound.render(outcome.reply))
    if outcome.status == "handover":  # for tools (`chat` marks what the person sends); Twilio ignores it
        response.headers[DEFERRED_HEADER] = "handover"
    # Standard Server-Timing: lets operators (and bench/) see our overhead apart from the model's.
    response.headers["Server-Timing"] = (
        f"app;dur={elapsed * 1000:.2f}, model;dur={outcome.model_s * 1000:.2f}"
    )
    return response


def _window_opened(user: str, body: str) -> None:
    """The user wrote: their 24-hour window is open again, and what was held for them while it
    was closed goes first, in order, once (docs/window.md); not when they wrote STOP (the
    command drops it). A Redis error costs only that."""
    services = current_app.extensions["bot.services"]
    window = services.users.window
    try:
        held = window.opened(user) if window is not None else 0
    except StoreUnavailable as err:
        log.warning("store.unavailable", stage="window", error=str(err))
        return
    sender = current_app.extensions.get("bot.sender")
    if held and sender is not None and normalize(body) not in services.prompts.replies.command_phrases("messages_off"):
        sender.deliver_held(user)


#: Delivery states that mean the user never got the reply.
FAILED_STATES = ("failed", "undelivered")


@bp.post(STATUS_PATH)
def message_status() -> Response:
    """Twilio's status callback for a message sent by API: failures are logged and counted,
    and a person's message in a handover gets its status (and error code) on the page."""
    structlog.contextvars.clear_contextvars()  # threads are reused: no other request's fields
    structlog.contextvars.bind_contextvars(twilio_sid=(request.form.get("MessageSid") or "")[:34])
    validator = current_app.extensions["bot.validator"]
    if not signature_ok(request, validator, current_app.config["BOT_SETTINGS"].PUBLIC_BASE_URL):
        log.warning("status.rejected", reason="bad_signature")
        return Response("invalid signature\n", status=403, mimetype="text/plain")
    state = (request.form.get("MessageStatus") or "").strip().lower()[:20]
    code = (request.form.get("ErrorCode") or "").strip()[:10]
    if state in FAILED_STATES:
        DELIVERY_FAILURES.labels(status=state, error_code=code or "none").inc()
        log.warning("reply.delivery_failed", status=state, error_code=code or "none")
        _record_failure(code)
    else:
        log.debug("reply.status", status=state)
    _record_handover_status(state, code)
    return Response(status=204)


def _record_failure(code: str) -> None:
    """Record a failed delivery against the user (a 63016 holds its text for their next
    message: docs/window.md)."""
    user = (request.form.get("To") or "").strip().removeprefix("whatsapp:")
    sid = (request.form.get("MessageSid") or "").strip()[:34]
    sender = current_app.extensions.get("bot.sender")
    if sender is not None and E164.match(user) and sid:
        sender.refused(user, sid, code)


def _record_handover_status(state: str, code: str) -> None:
    """Give a person's message in a handover its delivery status; a Redis error costs only that."""
    user = (request.form.get("To") or "").strip().removeprefix("whatsapp:")
    sid = (request.form.get("MessageSid") or "").strip()[:34]
    handover = current_app.extensions["bot.services"].handover
    if not E164.match(user) or not sid:
        return
    try:
        if handover.set_status(user, sid, state, code or None):
            log.info("handover.status", status=state, error_code=code or None)
    except StoreUnavailable as err:
        log.warning("store.unavailable", stage="handover_status", error=str(err))
