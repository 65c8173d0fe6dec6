"""The per-user rate limit, through the signed webhook on a real Redis."""

from __future__ import annotations

import pytest

from bot import create_app
from bot.conversation.replies import RATE_LIMITED_REPLY
from bot.dev.standin import StandinModel
from bot.observability.metrics import MESSAGES
from tests.conftest import USER, inbound_form, new_sid, sign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def post(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    client = create_app(make_settings(RATE_LIMIT_PER_MINUTE=3)).test_client()

    def send(body: str, user: str = USER, sid: str | None = None):  # type: ignore[no-untyped-def]
        form = inbound_form(body, user, sid)
        response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
        assert response.status_code == 200
        return response.get_data(as_text=True)

    return send


def test_past_the_limit_one_notice_then_silence_and_nothing_stored(post, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    before = MESSAGES.labels(outcome="rejected", reason="rate_limited")._value.get()
    answers = [post(f"Question {i}: what should I see in Lisbon this weekend?") for i in range(3)]
    assert all("canned reply" in a for a in answers)
    sid = new_sid()
    notice = post("Question 3: and in Porto?", sid=sid)
    assert RATE_LIMITED_REPLY.split("'")[0] in notice
    assert "<Message>" not in post("Question 4: and in Faro?")  # silence after the notice
    assert post("Question 3: and in Porto?", sid=sid) == notice  # Twilio's redelivery: same answer
    assert len(model.requests()) == 3  # nothing past the limit reached the model...
    assert [p.n for p in services.store.load(USER).recent] == [1, 2, 3]  # ...or the conversation
    assert MESSAGES.labels(outcome="rejected", reason="rate_limited")._value.get() - before == 2
    assert "canned reply" in post("Another user is not limited by the first", user="+14155550111")
    assert "cleared" in post("/reset")  # the user's own commands are never held back
    assert services.users.redis.ttl(f"chat_rate:{{{USER}}}") <= 60  # gone a minute after it opened


def test_a_saturated_process_answers_busy_at_once(make_settings, redis_client, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    import threading
    import time

    from bot.conversation.replies import BUSY_REPLY

    client = create_app(make_settings(MODEL_CONCURRENCY=1, LLM_TIMEOUT_S=10.0)).test_client()
    answers: dict[str, str] = {}

    def send(user: str) -> None:
        form = inbound_form("What should I see in Lisbon this weekend?", user)
        answers[user] = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)}).get_data(as_text=True)

    model.gate.clear()  # the model holds the first answer until the test lets it go
    first = threading.Thread(target=send, args=(USER,))
    first.start()
    try:
        deadline = time.monotonic() + 30
        while not model.requests() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert model.requests(), "the first message never reached the model"
        send("+14155550111")  # answered while the first still waits: at once, never after it
    finally:
        model.gate.set()
        first.join(30)
    busy = answers["+14155550111"]
    assert BUSY_REPLY.split("'")[0] in busy
    assert "canned reply" in answers[USER]
    assert services.store.load("+14155550111").recent == []  # nothing stored for the shed message
    send("+14155550111")  # the slot is free again
    assert "canned reply" in answers["+14155550111"]
