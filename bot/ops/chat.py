"""`whatsapp-bot chat`: talk to the running bot over HTTP, signed as Twilio signs.

Every message goes through the server's real webhook (its logs, its /metrics, its token),
as a WhatsApp user's would. Media go as Twilio sends them: `/voice FILE` and
`/photo FILE [caption]` upload a real file to the local Twilio stand-in that `make run`
starts (bot/dev/twilio_standin.py), which serves it behind Twilio's basic auth and redirect,
and post its Media URL; `/location LAT LON [label]` shares a place. Every message of a split
reply is shown, and so is every message sent to the user through the stand-in's Messages API:
a deferred reply (a voice note's, docs/deferred.md) is waited for, and a person's reply
during a handover shows before the next message.
"""

from __future__ import annotations

import json
import mimetypes
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from twilio.request_validator import RequestValidator

#: Twilio's sandbox number, the usual "To" of a development conversation.
SANDBOX_NUMBER = "whatsapp:+14155238886"
#: The content type WhatsApp gives a voice note, and what Twilio reports for other files.
VOICE_TYPES = {".ogg": "audio/ogg; codecs=opus", ".opus": "audio/ogg; codecs=opus", ".mp3": "audio/mpeg",
               ".m4a": "audio/mp4", ".amr": "audio/amr", ".wav": "audio/wav"}
TIMEOUT_S = 30.0
#: How long `chat` waits for a deferred reply to come through the Messages API.
DEFERRED_WAIT_S = 120.0
#: The account a message names when none is configured (a development conversation).
DEV_ACCOUNT = "AC" + "0" * 32
USAGE = "/voice FILE, /photo FILE [caption] and /location LAT LON [label] send media; an empty line or Ctrl-D quits."


class ChatError(ValueError):
    """A chat command that cannot be sent as typed (a missing file, no media server)."""


@dataclass(frozen=True)
class Reply:
    """What the webhook answered: the HTTP status and the messages of its TwiML."""

    status: int
    messages: list[str]
    error: str = ""
    deferred: bool = False  # a worker answers it, through the Messages API (docs/deferred.md)
    handover: bool = False  # a person holds the conversation: their replies come by API


class ChatClient:
    """Posts signed inbound messages to a webhook URL, as one WhatsApp user."""

    def __init__(self, url: str, token: str, user: str, signed_url: str | None = None,
                 account_sid: str | None = None, media_base: str | None = None) -> None:
        self.url = url
        self.signed_url = signed_url or url  # the URL the server checks the signature against
        self.validator = RequestValidator(token)
        self.user = user
        self.account_sid = account_sid or DEV_ACCOUNT
        self.media_base = media_base.rstrip("/") if media_base else None  # the Twilio stand-in
        self._api_seen = 0  # messages of the stand-in's Messages API already shown
        self._feed_lock = threading.Lock()

    def form(self, text: str) -> dict[str, str]:
        """Return Twilio's form for a message; /voice, /photo and /location carry media."""
        command, _, rest = text.partition(" ")
        media = command in ("/voice", "/photo")
        form = {
            "From": f"whatsapp:{self.user}",
            "To": SANDBOX_NUMBER,
            "Body": text,
            "MessageSid": ("MM" if media else "SM") + uuid.uuid4().hex,  # Twilio names media messages MM…
            "AccountSid": self.account_sid,
            "NumMedia": "0",
            "WaId": self.user.lstrip("+"),
            "ProfileName": "Terminal",
        }
        if media:
            path_text, _, caption = rest.strip().partition(" ")
            path = Path(path_text).expanduser()
            if not path_text or not path.is_file():
                raise ChatError(f"{command} needs a file: {command} FILE" + (" [caption]" if command == "/photo" else ""))
            content_type = self._content_type(command, path)
            form.update(Body=caption.strip() if command == "/photo" else "", NumMedia="1",
                        MediaContentType0=content_type, MediaUrl0=self.upload(form["MessageSid"], path, content_type))
        elif command == "/location":
            parts = rest.split(maxsplit=2)
            try:
                lat, lon = float(parts[0]), float(parts[1])
            except (IndexError, ValueError):
                raise ChatError("/location needs coordinates: /location LAT LON [label]") from None
            form.update(Body="", Latitude=str(lat), Longitude=str(lon))
            if len(parts) > 2:
                form.update(Label=parts[2])
        return form

    @staticmethod
    def _content_type(command: str, path: Path) -> str:
        if command == "/voice":
            return VOICE_TYPES.get(path.suffix.lower(), "audio/ogg; codecs=opus")
        guessed = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return "image/jpeg" if guessed == "image/jpg" else guessed

    def upload(self, message_sid: str, path: Path, content_type: str) -> str:
        """Put the file on the local Twilio stand-in and return its Media URL."""
        if self.media_base is None:
            raise ChatError("media need the local Twilio stand-in: run `make run` without TWILIO_AUTH_TOKEN")
        request = urllib.request.Request(
            f"{self.media_base}/_standin/media?message_sid={message_sid}", data=path.read_bytes(),
            headers={"Content-Type": content_type},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - our stand-in
            return str(json.loads(response.read())["url"])

    def sent_by_api(self) -> list[str]:
        """Return the messages sent to the user through the stand-in's Messages API since the
        last call (none without the stand-in)."""
        if self.media_base is None:
            return []
        with self._feed_lock:  # the terminal's poller and the conversation both read the feed
            query = urllib.parse.urlencode({"to": f"whatsapp:{self.user}", "after": self._api_seen})
            try:
                with urllib.request.urlopen(f"{self.media_base}/_standin/messages?{query}", timeout=5) as response:  # noqa: S310
                    feed = json.loads(response.read())
            except (OSError, ValueError):
                return []
            self._api_seen = int(feed.get("total", self._api_seen))
            return [str(m.get("body", "")) for m in feed.get("messages", [])]

    def skip_sent(self) -> None:
        """Forget what was sent to the user before this conversation."""
        self.sent_by_api()

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
                marked = response.headers.get("X-Bot-Reply")
        except urllib.error.HTTPError as err:
            return Reply(err.code, [], err.read().decode(errors="replace").strip()[:200])
        messages = [m.text or "" for m in ElementTree.fromstring(body).iter("Message")] if body.strip() else []
        return Reply(status, messages, deferred=marked == "deferred", handover=marked == "handover")


def converse(client: ChatClient, lines: Iterable[str], wait_s: float = DEFERRED_WAIT_S) -> int:
    """Send each line until an empty one or the end; print each reply message, and every
    message sent to the user through the Messages API, marked: `bot (by API)>` for a reply a
    worker sent, `person>` for what a person wrote during a handover."""
    client.skip_sent()
    handover = False
    if sys.stdin.isatty():  # at a terminal, what a person or a worker sends shows as it comes
        threading.Thread(target=poll_sent, args=(client, lambda: handover), daemon=True).start()
    for text in lines:
        text = text.rstrip("\n")
        if not text.strip():
            break
        show_sent(client.sent_by_api(), handover)  # a person's reply in a handover, a late reply
        try:
            reply = client.send(text)
        except ChatError as err:
            print(f"[not sent] {err}")
            continue
        if reply.status != 200:
            print(f"[HTTP {reply.status}] {reply.error}")
            if reply.status == 403:
                print("the server refused the signature: is TWILIO_AUTH_TOKEN the server's?", file=sys.stderr)
            continue
        handover = reply.handover or (handover and not reply.messages)
        if reply.deferred:
            show_sent(wait_for_api(client, wait_s), False)
            continue
        if not reply.messages:
            print("bot> (no reply" + (": a person from the team answers here)" if handover else ")"), flush=True)
        for message in reply.messages:
            print(f"bot> {message}", flush=True)
    return 0


def poll_sent(client: ChatClient, in_handover: Callable[[], bool], every_s: float = 1.0) -> None:
    """Show what comes through the Messages API while the user is typing."""
    while True:
        time.sleep(every_s)
        sent = client.sent_by_api()
        if sent:
            print()  # off the "you>" prompt
            show_sent(sent, in_handover())
            print("you> ", end="", flush=True)


def show_sent(messages: list[str], handover: bool) -> None:
    """Print messages that came through the Messages API, marked by who sent them."""
    for message in messages:
        print(f"{'person' if handover else 'bot (by API)'}> {message}", flush=True)


def wait_for_api(client: ChatClient, wait_s: float) -> list[str]:
    """Wait for a deferred reply (empty TwiML: a worker answers through the Messages API)."""
    if client.media_base is None:
        return []
    print("bot> (typing…)", flush=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = client.sent_by_api()
        if found:
            return found
        time.sleep(0.25)
    return []


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
