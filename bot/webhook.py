"""The Twilio edge: signature check, form parsing, TwiML out. Knows nothing of context."""

from __future__ import annotations

import re
import time
import uuid

import structlog
from flask import Blueprint, Response, current_app, request
from twilio.request_validator import (
    SIGNATURE_HEADER,
    SIGNATURE_SETTINGS_HEADER,
    RequestValidator,
    get_signature_algorithm,
)

from bot import twiml
from bot.config import E164
from bot.conversation import FALLBACK_REPLY, Conversation, InboundMessage
from bot.exceptions import InvalidInbound
from bot.logs import mask_phone
from bot.metrics import REPLY_SECONDS

log = structlog.get_logger(__name__)

bp = Blueprint("webhook", __name__)

#: MessageSid: two letters (SM, MM) and 32 hex digits.
_SID = re.compile(r"^[A-Za-z]{2}[0-9a-fA-F]{32}$")
#: Twilio posts at most 10 media items per message.
MAX_MEDIA = 10


def signed_url() -> str:
    """Return the URL Twilio signed: PUBLIC_BASE_URL + path when set, else what we were called on."""
    base = current_app.config["BOT_SETTINGS"].PUBLIC_BASE_URL
    if base:
        query = request.query_string.decode("latin-1")
        return f"{base}{request.path}" + (f"?{query}" if query else "")
    return request.url


def signature_ok() -> bool:
    """Check X-Twilio-Signature over the signed URL and every POSTed parameter."""
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not signature:
        return False
    validator: RequestValidator = current_app.extensions["bot.validator"]
    algorithm = get_signature_algorithm(request.headers.get(SIGNATURE_SETTINGS_HEADER))
    return validator.validate(signed_url(), request.form, signature, algorithm=algorithm)


def parse_inbound(form: dict[str, str] | object) -> InboundMessage:
    """Turn Twilio's inbound form into an InboundMessage, or raise InvalidInbound."""
    get = form.get  # type: ignore[attr-defined]
    sender = (get("From") or "").strip()
    if not sender:
        raise InvalidInbound("missing From")
    if not sender.startswith("whatsapp:"):
        raise InvalidInbound("not a WhatsApp sender")
    user = sender.removeprefix("whatsapp:")
    if not E164.match(user):
        raise InvalidInbound("From is not a whatsapp:+E164 number")
    sid = (get("MessageSid") or get("SmsMessageSid") or "").strip()
    if not _SID.match(sid):
        raise InvalidInbound("missing or malformed MessageSid")
    try:
        num_media = int(get("NumMedia") or 0)
    except ValueError:
        raise InvalidInbound("NumMedia is not a number") from None
    if not 0 <= num_media <= MAX_MEDIA:
        raise InvalidInbound("NumMedia out of range")
    media = tuple(
        (get(f"MediaContentType{i}") or "application/octet-stream").strip().lower()
        for i in range(num_media)
    )
    return InboundMessage(
        user=user,
        sid=sid,
        body=get("Body") or "",
        media_types=media,
        has_location=bool(get("Latitude") and get("Longitude")),
        profile_name=(get("ProfileName") or "")[:100],
    )


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
    if not signature_ok():
        log.warning("webhook.rejected", reason="bad_signature", url_host=request.host)
        return Response("invalid signature\n", status=403, mimetype="text/plain")
    try:
        msg = parse_inbound(request.form)
    except InvalidInbound as err:
        log.warning("webhook.rejected", reason="bad_form", detail=str(err))
        return Response(f"bad request: {err}\n", status=400, mimetype="text/plain")
    structlog.contextvars.bind_contextvars(message_sid=msg.sid)
    log.info("webhook.received", chars=len(msg.body), media=len(msg.media_types))
    log.debug("webhook.body", body=msg.body)

    conversation: Conversation = current_app.extensions["bot.conversation"]
    try:
        outcome = conversation.handle(msg)
    except Exception:
        log.exception("webhook.failed")
        return _twiml(twiml.render(FALLBACK_REPLY))
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
    response = _twiml(twiml.render(outcome.reply))
    # Standard Server-Timing: lets operators (and bench/) see our overhead apart from the model's.
    response.headers["Server-Timing"] = (
        f"app;dur={elapsed * 1000:.2f}, model;dur={outcome.model_s * 1000:.2f}"
    )
    return response
