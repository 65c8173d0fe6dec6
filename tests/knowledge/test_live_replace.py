"""Replacing a document changes the next answer on every web process, without a restart:
the app under gunicorn with two worker processes, as the Procfile runs it."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator
from urllib.parse import urlencode
from urllib.request import Request, urlopen
from xml.etree import ElementTree

import pytest

from bot.dev.standin import StandinModel
from tests.conftest import gunicorn_serving, inbound_form, sign

pytestmark = pytest.mark.integration

HOURS = b"""# Opening hours

## Sundays
On Sundays the shop opens at 09:00 and closes at 14:00, and the kitchen serves brunch until noon.
"""


def post(base: str, form: dict[str, str]) -> str:
    url = f"{base}/whatsapp"
    request = Request(url, data=urlencode(form).encode(), headers={"X-Twilio-Signature": sign(form, url=url)})
    with urlopen(request, timeout=15) as response:
        assert response.status == 200
        body = response.read()
    return "".join(m.text or "" for m in ElementTree.fromstring(body).iter("Message"))


def index_versions(base: str) -> dict[str, str]:
    """Return each worker process's index version, from /metrics (one sample per pid)."""
    with urlopen(f"{base}/metrics", timeout=5) as response:
        text = response.read().decode()
    return dict(re.findall(r'bot_knowledge_index_version\{index="knowledge",pid="(\d+)"\} ([\d.]+)', text))


@pytest.fixture
def gunicorn_app(settings, redis_client, model: StandinModel, tmp_path: Path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app under gunicorn, two worker processes, metrics summed over them."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    with gunicorn_serving(settings, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)) as url:
        yield url


def ask_until_both_answer(url: str, question: str, version: str) -> list[str]:
    """Ask from many users at once, batch after batch, until both processes report their
    index at `version` (a process may accept a whole batch; a few batches spread them)."""
    replies: list[str] = []
    for batch in range(10):
        forms = [inbound_form(question, user=f"+1415555{batch:02d}{i:02d}") for i in range(12)]
        with ThreadPoolExecutor(max_workers=len(forms)) as pool:
            replies += pool.map(lambda form: post(url, form), forms)
        versions = index_versions(url)
        if len(versions) == 2 and set(versions.values()) == {version}:
            return replies
    raise AssertionError(f"both processes never answered at version {version}: {index_versions(url)}")


def test_a_replaced_document_answers_from_every_process_at_its_next_message(gunicorn_app, services, model) -> None:  # type: ignore[no-untyped-def]
    model.latency_s = 0.3
    services.library.add(HOURS, source="hours.md", language="en")
    first = ask_until_both_answer(gunicorn_app, "when do you open on sundays?", "1.0")
    assert all("opens at 09:00" in reply for reply in first), first
    pids = set(index_versions(gunicorn_app))

    services.library.add(HOURS.replace(b"opens at 09:00", b"opens at 10:30"), source="hours.md", language="en")
    second = ask_until_both_answer(gunicorn_app, "when do you open on sundays?", "2.0")
    assert all("opens at 10:30" in reply for reply in second), second  # no process answered from the old text
    assert set(index_versions(gunicorn_app)) == pids  # the same processes: no restart

    services.library.remove("opening-hours")
    third = ask_until_both_answer(gunicorn_app, "when do you open on sundays?", "3.0")
    assert not any("From the reference" in reply for reply in third)
