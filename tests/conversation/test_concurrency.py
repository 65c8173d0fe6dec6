"""One user's messages racing through different threads never lose or duplicate a pair."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator
from urllib.parse import urlencode
from urllib.request import Request, urlopen
from xml.etree import ElementTree

import pytest
from werkzeug.serving import make_server

from bot import create_app
from bot.dev.standin import StandinModel
from tests.conftest import USER, gunicorn_serving, inbound_form, new_sid, sign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def server_url(settings, redis_client, model: StandinModel) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app served over real HTTP by a threaded server on 127.0.0.1."""
    server = make_server("127.0.0.1", 0, create_app(settings), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


def post(base: str, form: dict[str, str]) -> list[str]:
    url = f"{base}/whatsapp"
    request = Request(url, data=urlencode(form).encode(), headers={"X-Twilio-Signature": sign(form, url=url)})
    with urlopen(request, timeout=10) as response:
        assert response.status == 200
        body = response.read()
    return [m.text or "" for m in ElementTree.fromstring(body).iter("Message")]


def test_concurrent_messages_from_one_user_all_stored_once(server_url, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.latency_s = 0.2  # keep every request in flight at once
    n = 12
    forms = [inbound_form(f"Message number {i:02d} about my trip to Lisbon next month", sid=new_sid()) for i in range(n)]
    with ThreadPoolExecutor(max_workers=n) as pool:
        replies = list(pool.map(lambda f: post(server_url, f), forms))
    assert all(len(r) == 1 for r in replies)
    pending = services.store.pending_pairs(USER)
    assert sorted(p.user for p in pending) == sorted(f["Body"] for f in forms)
    context = services.store.load(USER)
    assert context.count_since_summary == n and len(context.recent) == 5
    assert len(model.requests()) == n


def test_concurrent_redelivery_calls_the_model_once(server_url, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.latency_s = 0.3
    form = inbound_form("Which museum in Lisbon would you recommend for a rainy day?")
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(lambda f: post(server_url, f), [form] * 4))
    assert len(model.requests()) == 1
    assert all(r == replies[0] for r in replies) and replies[0]
    assert services.store.load(USER).count_since_summary == 1


@pytest.fixture
def gunicorn_url(settings, redis_client, model: StandinModel) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app under gunicorn with two worker processes, as the Procfile runs it."""
    with gunicorn_serving(settings) as url:
        yield url


def test_concurrent_messages_across_processes_all_stored_once(gunicorn_url, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.latency_s = 0.2
    n = 12
    forms = [inbound_form(f"Process race {i:02d}: which Lisbon museum opens on Mondays?") for i in range(n)]
    duplicate = dict(forms[0])
    with ThreadPoolExecutor(max_workers=n + 1) as pool:
        replies = list(pool.map(lambda f: post(gunicorn_url, f), forms + [duplicate]))
    assert [i for i, r in enumerate(replies) if len(r) != 1] == []
    assert replies[0] == replies[-1]  # the redelivery, maybe in the other process, got the same reply
    pending = services.store.pending_pairs(USER)
    assert sorted(p.user for p in pending) == sorted(f["Body"] for f in forms)
    assert len(model.requests()) == n
