"""`python -m bot chat`: talk to the running bot over HTTP, signed as Twilio signs.

Every message goes through the server's real webhook (its logs, its /metrics, its token),
as a WhatsApp user's would. `/image [caption]` and `/voice` send a media message; every
message of a split reply is shown.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from xml.etree import ElementTree

from twilio.request_validator import RequestValidator

#: Twilio's sandbox number, the usual "To" of a development conversation.
SANDBOX_NUMBER = "whatsapp:+14155238886"
#: Media commands: the content type Twilio would report for each.
MEDIA = {"/image": "image/jpeg", "/voice": "audio/ogg"}
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Reply:
    """What the webhook answered: the HTTP status and the messages of its TwiML."""

    status: int
    messages: list[str]
    error: str = ""


class ChatClient:
    """Posts signed inbound messages to a webhook URL, as one WhatsApp user."""

    def __init__(self, url: str, token: str, user: str, signed_url: str | None = None) -> None:
        self.url = url
        self.signed_url = signed_url or url  # the URL the server checks the signature against
        self.validator = RequestValidator(token)
        self.user = user

    def form(self, text: str) -> dict[str, str]:
        """Return Twilio's form for a message; `/image caption` and `/voice` carry media."""
        form = {
            "From": f"whatsapp:{self.user}",
            "To": SANDBOX_NUMBER,
            "Body": text,
            "MessageSid": "SM" + uuid.uuid4().hex,
            "AccountSid": "AC" + "0" * 32,
            "NumMedia": "0",
            "WaId": self.user.lstrip("+"),
            "ProfileName": "Terminal",
        }
        command, _, caption = text.partition(" ")
        if command in MEDIA:
            form.update(
                Body=caption.strip(),
                NumMedia="1",
                MediaContentType0=MEDIA[command],
                MediaUrl0=f"https://api.twilio.com/2010-04-01/Accounts/{form['AccountSid']}/Messages/"
                f"{form['MessageSid']}/Media/ME{uuid.uuid4().hex}",
            )
        return form

    def send(self, text: str) -> Reply:
        """Post one message and return the reply; raise URLError when nothing listens."""
        form = self.form(text)
        request = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "X-Twilio-Signature": self.validator.compute_signature(self.signed_url, form),
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - our URL
                body = response.read()
                status = response.status
        except urllib.error.HTTPError as err:
            return Reply(err.code, [], err.read().decode(errors="replace").strip()[:200])
        messages = [m.text or "" for m in ElementTree.fromstring(body).iter("Message")] if body.strip() else []
        return Reply(status, messages)


def converse(client: ChatClient, lines: Iterable[str]) -> int:
    """Send each line until an empty one or the end; print each reply message."""
    for text in lines:
        text = text.rstrip("\n")
        if not text.strip():
            break
        reply = client.send(text)
        if reply.status != 200:
            print(f"[HTTP {reply.status}] {reply.error}")
            if reply.status == 403:
                print("the server refused the signature: is TWILIO_AUTH_TOKEN the server's?", file=sys.stderr)
            continue
        if not reply.messages:
            print("bot> (no reply)")
        for message in reply.messages:
            print(f"bot> {message}", flush=True)
    return 0


def read_lines() -> Iterator[str]:
    """Yield the user's lines: from the terminal with a prompt, else from stdin."""
    if not sys.stdin.isatty():
        yield from sys.stdin
        return
    while True:
        try:
            yield input("you> ")
        except EOFError:
            return
