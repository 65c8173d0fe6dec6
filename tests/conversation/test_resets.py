"""Resets by users, operators on WhatsApp, the admin API; TTLs; /metrics."""

from __future__ import annotations

import re

import pytest
import redis
from structlog.testing import capture_logs

from bot import create_app
from bot.conversation.replies import RESET_REPLY
from bot.dev.standin import StandinModel
from bot.storage.keys import CONTEXT_PREFIX, PENDING_PREFIX, SEEN_PREFIX, user_key
from tests.conftest import USER, inbound_form, sign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ADMIN_TOKEN = "admin-token-0123456789abcdef"
OPERATOR = "+447700900001"


def fill(send, n: int = 7, user: str = USER) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        send(f"Tell me about day {i} of my Lisbon itinerary, please.", user=user)


@pytest.mark.parametrize("text", ["forget everything", "Forget everything!", "CLEAR CHAT.", "  start over ", "/reset", "/RESET"])
def test_reset_phrases_clear_the_conversation(send, model: StandinModel, services, text) -> None:  # type: ignore[no-untyped-def]
    fill(send)
    services.redis.hset(user_key(CONTEXT_PREFIX, USER), "summary", "Old summary")
    model.reset()
    with capture_logs() as logs:
        response = send(text)
    assert RESET_REPLY.split(":")[0] in response.get_data(as_text=True)
    assert model.requests() == []  # a command, not a model turn
    context = services.store.load(USER)
    assert (context.summary, context.recent, context.count_since_summary) == ("", [], 0)
    assert services.store.pending_pairs(USER) == []
    audit = next(e for e in logs if e["event"] == "audit.reset")
    assert audit["via"] == "user" and "14155550100" not in repr(audit)


@pytest.mark.parametrize(
    "text",
    [
        "Please forget everything I said about the hotel, I booked another one",
        "Don't start over, continue with the itinerary please",
        "How do I clear chat history in WhatsApp?",
        "forget",
    ],
)
def test_sentences_containing_the_words_are_not_commands(send, model: StandinModel, services, text) -> None:  # type: ignore[no-untyped-def]
    fill(send, 3)
    model.reset()
    send(text)
    assert len(model.requests()) == 1
    assert services.store.load(USER).count_since_summary >= 3


def test_reset_keeps_facts_key_untouched(send, services) -> None:  # type: ignore[no-untyped-def]
    fill(send, 2)
    services.redis.hset(f"user_facts:{{{USER}}}", "name", '{"value": "Ana"}')
    send("/reset")
    assert services.redis.hget(f"user_facts:{{{USER}}}", "name")


def test_operator_resets_another_user_on_whatsapp(make_settings, redis_client, model: StandinModel, services, send) -> None:  # type: ignore[no-untyped-def]
    fill(send, 3)
    app = create_app(make_settings(OPERATOR_NUMBERS=OPERATOR))
    form = inbound_form(f"#reset {USER}", user=OPERATOR)
    model.reset()
    with capture_logs() as logs:
        response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert f"Reset done for {USER}" in response.get_data(as_text=True)
    assert services.store.load(USER).recent == [] and model.requests() == []
    audit = next(e for e in logs if e["event"] == "audit.reset")
    assert audit["via"] == "operator" and audit["actor"] != OPERATOR and audit["target"] != USER


def test_non_operator_cannot_reset_others(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    fill(send, 3)
    send(f"#reset {USER}", user="+447700900002")
    assert len(services.store.load(USER).recent) == 3


# -- admin API ---------------------------------------------------------------------------
@pytest.fixture
def admin(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    return create_app(make_settings(ADMIN_TOKEN=ADMIN_TOKEN)).test_client()


def test_admin_reset_needs_the_token(admin, send, services) -> None:  # type: ignore[no-untyped-def]
    fill(send, 3)
    url = f"/admin/users/{USER}/reset"
    assert admin.post(url).status_code == 401
    assert admin.post(url, headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert admin.post(url, headers={"Authorization": ADMIN_TOKEN}).status_code == 401  # no scheme
    assert len(services.store.load(USER).recent) == 3
    response = admin.post(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code == 200 and response.json == {"user": USER, "reset": True, "existed": True}
    assert services.store.load(USER).recent == []


def test_admin_rejects_a_bad_number(admin) -> None:  # type: ignore[no-untyped-def]
    response = admin.post("/admin/users/12345/reset", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code == 400


def test_admin_routes_are_off_without_a_token(client) -> None:  # type: ignore[no-untyped-def]
    assert client.post(f"/admin/users/{USER}/reset", headers={"Authorization": "Bearer x"}).status_code == 404


# -- retention ---------------------------------------------------------------------------
def test_every_user_key_has_the_ttl_and_activity_refreshes_it(send, redis_client: redis.Redis, settings) -> None:  # type: ignore[no-untyped-def]
    fill(send, 7)
    ttl = settings.CONTEXT_TTL_DAYS * 86400
    # chat_seen lives only as long as a redelivery can come: DEDUP_WINDOW_S
    ttls = {user_key(p, USER): ttl for p in (CONTEXT_PREFIX, PENDING_PREFIX)}
    ttls[user_key(SEEN_PREFIX, USER)] = settings.DEDUP_WINDOW_S
    for key, expected in ttls.items():
        assert expected - 5 <= redis_client.ttl(key) <= expected
        redis_client.expire(key, 100)
    send("One more question about Lisbon trams, please?")
    for key, expected in ttls.items():
        assert redis_client.ttl(key) > expected - 5


# -- metrics -----------------------------------------------------------------------------
def test_metrics_expose_the_counters(client, send, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"status": 500})
    send("This one fails because the model is down, sadly.")
    send("This one works and is long enough to be stored in context.")
    send("", NumMedia="1", MediaContentType0="video/mp4")  # a kind the bot does not read
    text = client.get("/metrics").get_data(as_text=True)
    assert 'bot_messages_total{outcome="accepted",reason="ok"}' in text
    assert 'bot_messages_total{outcome="rejected",reason="model_error"}' in text
    assert 'bot_messages_total{outcome="rejected",reason="non_text"}' in text
    assert "bot_reply_seconds_bucket" in text
    assert re.search(r'bot_model_tokens_total{kind="prompt",model="[^"]+",purpose="reply"}', text)
    assert 'bot_queue_depth{queue="summaries"} 0.0' in text
