"""`whatsapp-bot chat`: the command around bot/ops/chat.py, quick to start: it reads only
the settings, finds the bot `make run` started (.run/dev.env), and says how to start one
when there is none."""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.parse
from xml.etree import ElementTree

from bot.config import E164, load_settings, lookup
from bot.exceptions import ConfigError
from bot.ops.chat import USAGE, ChatClient, converse, read_lines

#: What to do when no bot is running.
START_ONE = "start one with `make run` (in another terminal) and wait for its ready line"


def parser(add_help: bool = True) -> argparse.ArgumentParser:
    """Return chat's own options (`whatsapp-bot --help` lists them through `parents`)."""
    out = argparse.ArgumentParser(prog="whatsapp-bot chat", add_help=add_help)
    out.add_argument("--user", type=e164, default="+15005550006", help="your number, +E164")
    out.add_argument("--url", help="the webhook (default: http://127.0.0.1:$PORT/whatsapp)")
    return out


def e164(value: str) -> str:
    """Parse a number as every command takes it: +E164, with or without "whatsapp:"."""
    value = value.strip().removeprefix("whatsapp:")
    if not E164.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an E.164 number like +14155550100")
    return value


def main(argv: list[str]) -> int:
    """Chat with the running bot over HTTP, signed as Twilio signs."""
    args = parser().parse_args(argv)
    try:
        settings = load_settings(need=("twilio",))
    except ConfigError:
        print(f"no bot is running here: {START_ONE}" if args.url is None
              else "set TWILIO_AUTH_TOKEN to the bot's, to sign as Twilio does", file=sys.stderr)
        return 2
    port = (lookup("PORT") or ("5000", "default"))[0]
    url = args.url or f"http://127.0.0.1:{port}/whatsapp"
    if not url.startswith(("http://", "https://")):
        print(f"--url must start with http:// or https:// (got {url!r})", file=sys.stderr)
        return 2
    # The server checks the signature against PUBLIC_BASE_URL when it has one.
    signed = f"{settings.PUBLIC_BASE_URL}/whatsapp" if settings.PUBLIC_BASE_URL and not args.url else url
    # Media go through the local Twilio stand-in of `make run` (never to a real Twilio).
    local = urllib.parse.urlsplit(settings.TWILIO_API_BASE_URL).hostname in ("127.0.0.1", "localhost", "::1")
    client = ChatClient(url, settings.twilio_auth_token, args.user, signed_url=signed,
                        account_sid=settings.TWILIO_ACCOUNT_SID, media_base=settings.TWILIO_API_BASE_URL if local else None)
    print(f"Chatting as whatsapp:{args.user} with {url}. {USAGE}", file=sys.stderr)
    try:
        return converse(client, read_lines())
    except urllib.error.URLError as err:
        print(f"no bot answers at {url} ({err.reason}): {START_ONE}", file=sys.stderr)
        return 2
    except (OSError, ValueError, ElementTree.ParseError) as err:  # dropped connection, not TwiML
        print(f"the bot at {url} did not answer properly: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
