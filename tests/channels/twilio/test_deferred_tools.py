"""Tool turns on the deferred path (docs/tools.md, docs/deferred.md): typed text is answered
by a worker when two model rounds and a call cannot fit in the webhook, and a worker killed
between the user's yes and the reply still books once."""

from __future__ import annotations

import threading
import time
from datetime import date
from typing import Any, Iterator

import pytest

from bot.dev.clinic_api import ClinicApi, ClinicServer, serve
from bot.dev.embedded import free_port
from bot.dev.twilio_standin import TwilioStandin
from tests.channels.twilio.conftest import worker_pool
from tests.channels.twilio.test_deferred import sent_to_user
from tests.conftest import USER, inbound_form

pytestmark = pytest.mark.integration

TODAY = date(2030, 1, 7)
DAY = "2030-01-08"


class HeldClinic(ClinicApi):
    """The clinic, holding its answer to a booking (made) until `gate` is set."""

    def __init__(self) -> None:
        super().__init__(TODAY)
        self.booked = threading.Event()
        self.gate = threading.Event()

    def book(self, body: Any, key: str | None) -> Any:
        result = super().book(body, key)
        self.booked.set()
        self.gate.wait(30)
        return result


@pytest.fixture()
def clinic() -> Iterator[tuple[HeldClinic, str]]:
    port = free_port()
    api = HeldClinic()
    server: ClinicServer = serve("127.0.0.1", port, clinic=api)
    try:
        yield api, f"http://127.0.0.1:{port}"
    finally:
        api.gate.set()
        server.shutdown()
        server.server_close()


def test_a_worker_killed_between_the_yes_and_the_reply_still_books_once(  # type: ignore[no-untyped-def]
        deferred_with, clinic, twilio: TwilioStandin, run_worker, queue_redis_url) -> None:
    api, url = clinic
    # The model's worst case (2 x 5 s) twice, and a call: more than the webhook's 13.5 s.
    post = deferred_with(TOOLS_OPENAPI=f"{url}/openapi.json", TOOLS_BASE_URL=url, LLM_TIMEOUT_S=5, LLM_MAX_RETRIES=1)
    assert post(inbound_form(f"Marca-me para {DAY} às 10h"))[0] == []  # deferred: empty TwiML
    run_worker()
    assert "Posso avançar?" in sent_to_user(twilio)[-1]
    api.gate.clear()
    post(inbound_form("sim"))
    try:
        with worker_pool(queue_redis_url) as kill_busy:
            assert api.booked.wait(30), "the yes never reached the API"
            kill_busy()  # the API booked; the worker dies before it hears back
            api.gate.set()
            deadline = time.monotonic() + 45
            while not any(m.startswith("Feito") for m in sent_to_user(twilio)) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)  # a second reply would come now
    finally:
        api.gate.set()
    done = [m for m in sent_to_user(twilio) if m.startswith("Feito")]
    assert len(done) == 1
    booked = [a for a in api.appointments.values() if a.phone == USER and a.status == "booked"]
    assert len(booked) == 1 and booked[0].time == "10:00"
    posts = [r for r in api.requests if r["method"] == "POST"]
    assert len(posts) == 2 and len({r["headers"].get("Idempotency-Key") for r in posts}) == 1  # redone: same key
