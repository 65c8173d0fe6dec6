"""README's tour is what the bot really does: its chat transcripts are played against the
stand-ins, as `make run` runs them, and every line the bot says must match (docs/testing.md).

A block marked `<!-- tour -->` is played in order: `you> …` is posted as WhatsApp would
(signed), `bot> …` must be the reply ("…" stands for any text), a line in parentheses waits
for the user's pause (the extraction job runs when due), `$ .venv/bin/whatsapp-bot …` runs
that command (`chat --user +E164` chooses the user of the lines after it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bot import create_app
from bot.jobs.queue import FACTS_QUEUE
from bot.storage.keys import MEMORY_PREFIX, user_key
from tests.cli_support import run_cli
from tests.conftest import USER, give_workers, inbound_form, redis_env, run_when_due, sign

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- tour -->\n```[a-z]*\n(.*?)```", re.DOTALL)

pytestmark = pytest.mark.integration


def blocks() -> list[str]:
    """Return the README's tour transcripts, in order."""
    return BLOCK.findall(README)


def matches(expected: str, actual: str) -> bool:
    """Return whether a reply is the line the README shows ("…" stands for any text)."""
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual, re.DOTALL) is not None


def test_the_readme_has_its_tour() -> None:
    assert len(blocks()) >= 3


def test_the_tour_is_what_the_bot_says(make_settings, redis_client, model, monkeypatch, run_worker,  # type: ignore[no-untyped-def]
                                       redis_url, queue_redis_url, tmp_path, embedding_server) -> None:
    # As `make run` runs it: the stand-in adds no filler; the user's pause is one second here.
    settings = make_settings(EXTRACTION_INTERVAL=1, EXTRACTION_IDLE_S=1)
    give_workers(settings, monkeypatch)
    client = create_app(settings).test_client()
    model.reply_chars = 0
    cli_env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "QUEUE_"))}
    cli_env.update(redis_env(redis_url, queue_redis_url))
    try:
        for block in blocks():
            user = USER
            lines = block.splitlines()
            replies: list[str] = []
            for line in lines:
                if line.startswith("you> "):
                    form = inbound_form(line[5:], user=user)
                    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
                    assert response.status_code == 200
                    replies.append("".join(m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")))
                elif line.startswith("bot> "):
                    assert replies, f"the README shows a reply before any message: {line}"
                    actual = replies.pop(0)
                    assert matches(line[5:], actual), f"README: {line[5:]!r}\nthe bot: {actual!r}"
                elif line.startswith("(") and line.endswith(")"):
                    memory = user_key(MEMORY_PREFIX, user)
                    run_when_due(queue_redis_url, FACTS_QUEUE, run_worker,
                                 until=lambda: redis_client.hget(memory, "extract_job_token") is None)
                elif line.startswith("$ .venv/bin/whatsapp-bot "):
                    words = line.split()[2:]
                    if words[:1] == ["chat"] and "--user" in words:
                        user = words[words.index("--user") + 1]
                        continue
                    result = run_cli(words, cli_env, ROOT)
                    assert result.returncode == 0, result.stderr
    finally:
        model.reply_chars = 240
