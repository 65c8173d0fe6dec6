"""Twilio's side of an inbound message: the signature check and parsing the posted form."""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import quote

from flask import Request
from twilio.request_validator import (
    SIGNATURE_HEADER,
    SIGNATURE_SETTINGS_HEADER,
    RequestValidator,
    get_signature_algorithm,
)

from bot.config import E164
from bot.conversation.messages import InboundMessage, MediaItem
from bot.exceptions import InvalidInbound
from bot.media.location import Location

#: MessageSid: two letters (SM, MM) and 32 hex digits.
_SID = re.compile(r"^[A-Za-z]{2}[0-9a-fA-F]{32}$")
#: Twilio posts at most 10 media items per message.
MAX_MEDIA = 10
#: A Media URL is about 150 characters; anything far longer is not Twilio's.
MAX_MEDIA_URL = 500
#: A place's label or address is kept to this many characters.
MAX_PLACE_CHARS = 200


def signed_url(request: Request, base: str | None) -> str:
    """Return the URL Twilio signed, byte for byte: `base` (PUBLIC_BASE_URL) or the scheme and
    host we were called on (port included), then the path and the query exactly as sent.

    The query is never decoded: Twilio signs "?q=caf%C3%A9", not "?q=café".
    """
    origin = base or f"{request.scheme}://{request.host}"
    path = quote(request.script_root + request.path, safe="/:@!$&'()*+,;=~")
    query = request.query_string.decode("latin-1")
    return f"{origin}{path}" + (f"?{query}" if query else "")


def signature_ok(request: Request, validator: RequestValidator, base: str | None) -> bool:
    """Check X-Twilio-Signature over the signed URL and every POSTed parameter."""
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not signature:
        return False
    algorithm = get_signature_algorithm(request.headers.get(SIGNATURE_SETTINGS_HEADER))
    return validator.validate(signed_url(request, base), request.form, signature, algorithm=algorithm)


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
        MediaItem(
            content_type=(get(f"MediaContentType{i}") or "application/octet-stream").strip().lower()[:100],
            ref=(get(f"MediaUrl{i}") or "").strip()[:MAX_MEDIA_URL],
        )
        for i in range(num_media)
    )
    return InboundMessage(
        user=user,
        sid=sid,
        body=get("Body") or "",
        media=media,
        location=parse_location(get),
        profile_name=(get("ProfileName") or "")[:100],
        to=(get("To") or "").strip()[:40],
    )


def parse_location(get: Any) -> Location | None:
    """Return the shared location of Twilio's form (Latitude, Longitude, Address, Label), or
    None; coordinates out of range are malformed (InvalidInbound)."""
    lat, lon = (get("Latitude") or "").strip(), (get("Longitude") or "").strip()
    if not (lat and lon):
        return None
    try:
        latitude, longitude = float(lat), float(lon)
    except ValueError:
        raise InvalidInbound("Latitude or Longitude is not a number") from None
    if not (math.isfinite(latitude) and math.isfinite(longitude) and -90 <= latitude <= 90 and -180 <= longitude <= 180):
        raise InvalidInbound("Latitude or Longitude out of range")
    return Location(
        latitude=latitude,
        longitude=longitude,
        label=" ".join((get("Label") or "").split())[:MAX_PLACE_CHARS],
        address=" ".join((get("Address") or "").split())[:MAX_PLACE_CHARS],
    )
