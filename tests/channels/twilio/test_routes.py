"""POST /whatsapp end to end: signed requests, real Redis, the stand-in over real HTTP."""

from __future__ import annotations

import json
import time
from xml.etree import ElementTree

import pytest
import redis
from structlog.testing import capture_logs

from bot import create_app
from bot.conversation.prompt import render_summary
from bot.conversation.replies import COMMAND_UNAVAILABLE_REPLY, FALLBACK_REPLY, shipped, unsupported_media_reply
from bot.dev.embedded import free_port
from bot.dev.standin import StandinModel
from bot.storage.keys import CONTEXT_PREFIX, user_key
from bot.llm.tokens import TokenCounter
from tests.conftest import AUTH_TOKEN, BUSY_SLACK_S, USER, inbound_form, new_sid, sign

pytestmark = pytest.mark.integration

QUESTION = "Can you recommend a good neighbourhood to stay in Lisbon?"
ANSWER = "Try Alfama for its old streets and views, or Chiado if you like shops and cafés."


def messages(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.data
    assert response.mimetype == "application/xml"
    return [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")]


def context_hash(r: redis.Redis, user: str = USER) -> dict[str, str]:
    return r.hgetall(user_key(CONTEXT_PREFIX, user))


# -- signature -------------------------------------------------------------------------
def test_valid_message_gets_a_reply_and_is_stored(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": ANSWER})
    assert messages(send(QUESTION)) == [ANSWER]
    context = services.store.load(USER)
    assert [(p.user, p.assistant) for p in context.recent] == [(QUESTION, ANSWER)]
    assert context.count_since_summary == 1 and context.last_interaction


@pytest.mark.parametrize("signature", ["", "bm90IGEgc2lnbmF0dXJl", None])
def test_bad_signature_is_403_and_touches_nothing(  # type: ignore[no-untyped-def]
    client, model: StandinModel, redis_client: redis.Redis, signature
) -> None:
    form = inbound_form(QUESTION)
    headers = {} if signature is None else {"X-Twilio-Signature": signature}
    response = client.post("/whatsapp", data=form, headers=headers)
    assert response.status_code == 403
    assert model.requests() == []
    assert redis_client.dbsize() == 0


def test_signature_over_tampered_form_is_403(client, model: StandinModel, redis_client: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form(QUESTION)
    signature = sign(form)
    form["Body"] = "something else"
    assert client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": signature}).status_code == 403
    assert redis_client.dbsize() == 0 and model.requests() == []


def test_signature_with_wrong_token_is_403(client, redis_client: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form(QUESTION)
    headers = {"X-Twilio-Signature": sign(form, token="another-account-token")}
    assert client.post("/whatsapp", data=form, headers=headers).status_code == 403
    assert redis_client.dbsize() == 0


def test_public_base_url_is_what_is_validated(make_settings, redis_client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    """Behind a TLS proxy the app sees http://internal:8000; Twilio signed the public URL."""
    app = create_app(make_settings(PUBLIC_BASE_URL="https://bot.example.com"))
    client = app.test_client()
    form = inbound_form(QUESTION)
    public = {"X-Twilio-Signature": sign(form, url="https://bot.example.com/whatsapp")}
    internal = {"X-Twilio-Signature": sign(form, url="http://internal:8000/whatsapp")}
    assert client.post("/whatsapp", data=form, headers=internal, base_url="http://internal:8000").status_code == 403
    assert client.post("/whatsapp", data=form, headers=public, base_url="http://internal:8000").status_code == 200


def test_forwarded_headers_are_trusted_only_when_enabled(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form(QUESTION)
    headers = {
        "X-Twilio-Signature": sign(form, url="https://bot.example.com/whatsapp"),
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "bot.example.com",
    }
    untrusting = create_app(make_settings()).test_client()
    assert untrusting.post("/whatsapp", data=form, headers=headers).status_code == 403
    trusting = create_app(make_settings(TRUST_FORWARDED_HEADERS=True)).test_client()
    assert trusting.post("/whatsapp", data=form, headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("public_base", "called", "signed"),
    [
        (None, "http://localhost/whatsapp?src=caf%C3%A9&x=1", "http://localhost/whatsapp?src=caf%C3%A9&x=1"),
        (None, "http://localhost:8080/whatsapp?n=%E2%82%AC", "http://localhost:8080/whatsapp?n=%E2%82%AC"),
        ("https://bot.example.com", "http://internal:8000/whatsapp?a=%C3%B1", "https://bot.example.com/whatsapp?a=%C3%B1"),
        ("https://example.com/bot", "http://internal:8000/whatsapp", "https://example.com/bot/whatsapp"),
    ],
)
def test_signed_url_variants(make_settings, redis_client, model, public_base, called, signed) -> None:  # type: ignore[no-untyped-def]
    """Query strings (percent-encoded, non-ASCII), ports and path prefixes, as Twilio signs them."""
    client = create_app(make_settings(PUBLIC_BASE_URL=public_base)).test_client()
    form = inbound_form(QUESTION)
    origin, _, path = called.partition("//")[2].partition("/")
    good = client.post(
        "/" + path, data=form, headers={"X-Twilio-Signature": sign(form, url=signed)}, base_url=f"http://{origin}"
    )
    assert good.status_code == 200
    tampered = signed.replace("whatsapp", "whatsapp?evil=1") if "?" not in signed else signed + "&evil=1"
    bad = client.post(
        "/" + path, data=form, headers={"X-Twilio-Signature": sign(form, url=tampered)}, base_url=f"http://{origin}"
    )
    assert bad.status_code == 403


def test_a_path_prefix_from_a_trusted_proxy_is_signed(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    client = create_app(make_settings(TRUST_FORWARDED_HEADERS=True)).test_client()
    form = inbound_form(QUESTION)
    headers = {
        "X-Twilio-Signature": sign(form, url="https://bot.example.com/bot/whatsapp?k=%C3%A9"),
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "bot.example.com",
        "X-Forwarded-Prefix": "/bot",
    }
    assert client.post("/whatsapp?k=%C3%A9", data=form, headers=headers).status_code == 200


# -- malformed input -------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes",
    [
        {"From": ""},
        {"From": "whatsapp:not-a-number"},
        {"From": "whatsapp:+0123"},
        {"MessageSid": ""},
        {"MessageSid": "SM123"},
        {"NumMedia": "lots"},
        {"NumMedia": "-1"},
        {"NumMedia": "99"},
    ],
)
def test_malformed_forms_are_400(client, model: StandinModel, redis_client: redis.Redis, changes) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form(QUESTION)
    form.update(changes)
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 400
    assert model.requests() == [] and redis_client.dbsize() == 0


def test_non_whatsapp_sender_is_400(client, model: StandinModel, redis_client: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form(QUESTION)
    form["From"] = "+14155550100"  # an SMS sender
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 400 and b"WhatsApp" in response.data
    assert model.requests() == [] and redis_client.dbsize() == 0


def test_get_is_not_allowed(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/whatsapp").status_code == 405


def test_oversized_post_is_413(client, redis_client: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    form = inbound_form("x" * 100_000)
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 413 and redis_client.dbsize() == 0


def test_5000_char_body_is_answered_within_budget(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    body = ("I have a long story to tell you about my trip. " * 110)[:5000]
    assert len(body) == 5000
    assert len(messages(send(body))) == 1
    [request] = model.requests()
    counter = TokenCounter("gpt-4o-mini")
    assert counter.count_messages(request["messages"]) <= 800
    assert request["messages"][-1]["content"].endswith("[…]")
    # the stored pair is cut too (1000 characters), keeping the user's Redis footprint small
    stored = services.store.load(USER).recent[0].user
    assert stored.startswith(body[:900]) and stored.endswith("[…]") and len(stored) <= 1000


# -- redelivery ------------------------------------------------------------------------
def test_duplicate_message_sid_gets_the_same_reply_once(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": ANSWER})
    sid = new_sid()
    first = messages(send(QUESTION, sid=sid))
    second = messages(send(QUESTION, sid=sid))
    assert first == second == [ANSWER]
    assert len(model.requests()) == 1
    context = services.store.load(USER)
    assert len(context.recent) == 1 and context.count_since_summary == 1


def test_duplicate_of_a_fallback_replays_the_fallback(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.script({"status": 500})
    sid = new_sid()
    assert messages(send(QUESTION, sid=sid)) == [FALLBACK_REPLY]
    assert messages(send(QUESTION, sid=sid)) == [FALLBACK_REPLY]
    assert len(model.requests()) == 1


def test_a_redelivery_after_30_more_messages_is_still_answered_once(  # type: ignore[no-untyped-def]
    send, model: StandinModel, services
) -> None:
    """Redelivery is a matter of time, not of how many messages came in between."""
    long_reply = ("Alfama is old and steep, with views over the river. " * 60).strip()  # > 1600 chars
    model.script({"content": long_reply, "match": "first question"})
    sid = new_sid()
    first = messages(send("My first question: where should I stay in Lisbon for a week?", sid=sid))
    assert len(first) == 2 and " ".join(first).replace("  ", " ").startswith("Alfama")  # split, not clipped
    for i in range(30):
        send(f"Question number {i} about Lisbon trams and museums, please?")
    requests_before = len(model.requests())
    seq_before = services.store.load(USER).seq
    again = messages(send("My first question: where should I stay in Lisbon for a week?", sid=sid))
    assert again == first  # the whole first reply, split as it was
    assert len(model.requests()) == requests_before and services.store.load(USER).seq == seq_before


def test_a_late_redelivery_gets_an_empty_answer_and_is_logged(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    client = create_app(make_settings(REDELIVERY_REPLY_S=0)).test_client()
    form = inbound_form(QUESTION)
    headers = {"X-Twilio-Signature": sign(form)}
    assert len(messages(client.post("/whatsapp", data=form, headers=headers))) == 1
    time.sleep(0.01)
    with capture_logs() as logs:
        late = client.post("/whatsapp", data=form, headers=headers)
    assert late.status_code == 200 and messages(late) == []
    assert len(model.requests()) == 1
    [event] = [e for e in logs if e["event"] == "message.duplicate"]
    assert event["replayed"] is False and event["age_s"] > 0


# -- filtering -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "step",
    [
        {"status": 500},
        {"status": 429},
        {"status": 503},
        {"delay_s": 3.0},  # past LLM_TIMEOUT_S=2
    ],
    ids=["500", "429", "503", "timeout"],
)
def test_model_failure_gets_fallback_never_stored(send, model: StandinModel, services, step) -> None:  # type: ignore[no-untyped-def]
    model.script(step)
    with capture_logs() as logs:
        assert messages(send(QUESTION)) == [FALLBACK_REPLY]
    context = services.store.load(USER)
    assert context.recent == [] and context.count_since_summary == 0
    assert any(e["event"] == "llm.failed" for e in logs)
    assert any(e["event"] == "pair.rejected" and e["reason"] == "model_error" for e in logs)


def test_connection_refused_gets_fallback(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1"))
    form = inbound_form(QUESTION)
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [FALLBACK_REPLY]
    assert int(context_hash(redis_client).get("message_count_since_summary", 0)) == 0


@pytest.mark.parametrize(
    "step, reason",
    [
        ({"content": "Sorry, I didn't understand that. Could you say it another way?"}, "rephrase_reply"),
        ({"content": ANSWER, "finish_reason": "length"}, "incomplete_reply"),
        ({"content": "Ok!"}, "too_short"),
    ],
)
def test_non_answers_are_sent_but_not_stored(send, model: StandinModel, services, step, reason) -> None:  # type: ignore[no-untyped-def]
    model.script(step)
    body = "Hi" if reason == "too_short" else QUESTION
    with capture_logs() as logs:
        assert messages(send(body)) == [step["content"]]
    assert services.store.load(USER).recent == []
    assert {"event": "pair.rejected", "reason": reason, "log_level": "info"}.items() <= next(
        e for e in logs if e["event"] == "pair.rejected"
    ).items()


def test_media_we_cannot_read_without_text_is_politely_refused(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    """Video (and documents, contacts): voice notes and photos have tests/conversation/test_media.py."""
    with capture_logs() as logs:
        reply = messages(
            send("", NumMedia="1", MediaContentType0="video/mp4", MediaUrl0="https://api.twilio.com/x")
        )
    assert reply == [unsupported_media_reply(shipped(), "en", voice=True, vision=True)]
    assert "voice messages and photos" in reply[0]
    assert model.requests() == []
    context = services.store.load(USER)
    assert context.recent == [] and context.count_since_summary == 0
    assert any(e["event"] == "pair.rejected" and e["reason"] == "non_text" for e in logs)


def test_media_placeholder_is_stored_when_configured(make_settings, redis_client, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "Nice photo! It looks like a sunset over the sea at the beach."})
    app = create_app(make_settings(MEDIA_PLACEHOLDERS=True, VISION=False))
    for content_type, placeholder in (("image/png", "[Image received]"), ("video/mp4", "[Video received]")):
        form = inbound_form("", NumMedia="1", MediaContentType0=content_type)
        response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
        assert len(messages(response)) == 1
        assert model.requests()[-1]["messages"][-1]["content"] == placeholder
        assert services.store.load(USER).recent[-1].user == placeholder


def test_media_with_caption_uses_the_caption(send, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    send("What does this contract say about notice?", NumMedia="1", MediaContentType0="application/pdf")
    assert model.requests()[0]["messages"][-1]["content"] == "What does this contract say about notice?"


# -- context ---------------------------------------------------------------------------
def test_sixth_pair_keeps_five_recent_and_all_pending(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    for i in range(6):
        model.script({"content": f"{ANSWER} (answer {i})"})
        send(f"{QUESTION} (question {i})")
    context = services.store.load(USER)
    assert [p.user[-2] for p in context.recent] == ["1", "2", "3", "4", "5"]
    assert context.count_since_summary == 6
    assert len(services.store.pending_pairs(USER)) == 6
    model.reset()
    send("And one more question about Lisbon, please?")
    prompt = model.requests()[0]["messages"]
    assert [m["role"] for m in prompt] == ["system"] + ["user", "assistant"] * 5 + ["user"]
    assert prompt[1]["content"].endswith("(question 1)")


def test_summary_is_injected_when_present(send, model: StandinModel, redis_client: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "summary", "The user is planning a trip to Lisbon.")
    send(QUESTION)
    prompt = model.requests()[0]["messages"]
    assert prompt[1] == {"role": "system", "content": render_summary("The user is planning a trip to Lisbon.")}


def test_missing_summary_is_not_injected(send, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    send(QUESTION)
    assert [m["role"] for m in model.requests()[0]["messages"]] == ["system", "user"]


def test_long_reply_is_split_into_messages(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    paragraphs = [f"Part {i}. " + "Lisbon has many hills and lovely views. " * 20 for i in range(4)]
    model.script({"content": "\n\n".join(paragraphs)})
    parts = messages(send(QUESTION))
    assert len(parts) >= 3 and all(len(p) <= 1600 for p in parts)
    assert "\n\n".join(parts) == "\n\n".join(p.strip() for p in paragraphs)


def test_each_user_has_their_own_context(send, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    send(QUESTION, user="+14155550100")
    send("What about Porto, where should I stay there?", user="+447700900123")
    assert len(services.store.load("+14155550100").recent) == 1
    assert services.store.load("+447700900123").recent[0].user.startswith("What about Porto")
    second_prompt = model.requests()[1]["messages"]
    assert QUESTION not in str(second_prompt)


# -- logs, health, degradation ---------------------------------------------------------
def test_logs_mask_numbers_and_hide_bodies_at_info(send, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    with capture_logs() as logs:
        send("My secret plan is to visit Lisbon next summer with my family.")
    info = [e for e in logs if e["log_level"] != "debug"]
    assert info, "expected info events"
    flat = repr(info)
    assert "secret plan" not in flat and "14155550100" not in flat
    events = {e["event"] for e in info}
    assert {"webhook.received", "llm.completed", "pair.accepted", "webhook.replied"} <= events
    completed = next(e for e in info if e["event"] == "llm.completed")
    assert completed["prompt_tokens"] > 0 and completed["prompt"] == "reply_system@1"
    assert "duration_ms" in completed and completed["model"]


def test_health_and_readiness(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/healthz").json == {"status": "ok"}
    assert client.get("/readyz").json["redis"] == "ok"


def test_redis_down_degrades_the_reply(make_settings, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": ANSWER})
    app = create_app(make_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"))
    client = app.test_client()
    assert client.get("/readyz").status_code == 503
    form = inbound_form(QUESTION)
    with capture_logs() as logs:
        response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [ANSWER]
    assert any(e["event"] == "store.unavailable" for e in logs)


@pytest.mark.parametrize("command", ["forget everything", "delete my data", "stop remembering me", "/reset"])
def test_a_command_during_an_outage_is_refused_not_answered(make_settings, model: StandinModel, command) -> None:  # type: ignore[no-untyped-def]
    """Nothing can be cleared while Redis is down: say so; never hand the command to the model."""
    client = create_app(make_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")).test_client()
    form = inbound_form(command)
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [COMMAND_UNAVAILABLE_REPLY]
    assert model.requests() == []


@pytest.mark.parametrize("failing", ["reset", "set_meta", "erase_keys"])
def test_a_command_whose_write_fails_says_so(send, model: StandinModel, monkeypatch, failing) -> None:  # type: ignore[no-untyped-def]
    import bot.users.lifecycle
    from bot.exceptions import StoreUnavailable
    from bot.storage.context import ContextStore
    from bot.storage.memory_meta import MemoryMetaStore

    def down(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise StoreUnavailable("connection reset")

    target = {"reset": (ContextStore, "reset"), "set_meta": (MemoryMetaStore, "set_meta"),
              "erase_keys": (bot.users.lifecycle, "erase_keys")}[failing]
    command = {"reset": "forget everything", "set_meta": "stop remembering me", "erase_keys": "YES"}[failing]
    if failing == "erase_keys":
        send("delete my data")
    monkeypatch.setattr(*target, down)
    assert messages(send(command)) == [COMMAND_UNAVAILABLE_REPLY]
    assert model.requests() == []


def test_unexpected_error_is_a_polite_reply_not_500(app, client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def boom(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("bug")

    from bot.conversation.steps.command import CommandStep  # the first step after the claim

    monkeypatch.setattr(CommandStep, "__call__", boom)
    form = inbound_form(QUESTION)
    sid = form["MessageSid"]
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [FALLBACK_REPLY]
    # the claim was released: a redelivery is processed again rather than dropped
    store = app.extensions["bot.services"].store
    assert store.claim(USER, sid).status == "new"


def test_server_timing_header(send) -> None:  # type: ignore[no-untyped-def]
    timing = send(QUESTION).headers["Server-Timing"]
    assert timing.startswith("app;dur=") and "model;dur=" in timing


def test_auth_token_is_not_echoed(send) -> None:  # type: ignore[no-untyped-def]
    assert AUTH_TOKEN.encode() not in send(QUESTION).data


def test_retry_after_cannot_stretch_the_webhook(make_settings, redis_client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    """A 429 asking to wait two minutes gets the fallback now, not after Twilio gave up."""
    app = create_app(make_settings(LLM_TIMEOUT_S=2.0, LLM_MAX_RETRIES=2))
    model.script(*[{"status": 429, "retry_after": 120} for _ in range(3)])
    form = inbound_form(QUESTION)
    started = time.monotonic()
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [FALLBACK_REPLY]
    assert time.monotonic() - started < 10  # the SDK alone would have slept 120 s
    assert 1 <= len(model.requests()) <= 3


def test_transient_model_error_is_retried(make_settings, redis_client, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(LLM_MAX_RETRIES=1))
    model.script({"status": 503}, {"content": ANSWER})
    form = inbound_form(QUESTION)
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert messages(response) == [ANSWER]
    assert len(model.requests()) == 2


def test_real_log_pipeline_masks_numbers_everywhere(make_settings, redis_client, model: StandinModel, capsys) -> None:  # type: ignore[no-untyped-def]
    """Through the configured processors (not capture_logs): JSON lines, numbers masked,
    bodies absent at INFO, including the summary and extraction enqueue events."""
    from bot.observability import logs

    logs._configured = None  # force a fresh configuration with JSON output
    app = create_app(make_settings(LOG_LEVEL="INFO", LOG_JSON=True, EXTRACTION_INTERVAL=1))
    client = app.test_client()
    capsys.readouterr()
    for i in range(10):
        form = inbound_form(f"Secret body number {i}: my plan for the Lisbon trip in May.")
        client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    err = capsys.readouterr().err
    logs._configured = None
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    events = {e["event"] for e in lines}
    assert {"webhook.received", "summary.enqueued", "extraction.enqueued"} <= events
    assert "14155550100" not in err and "Secret body" not in err


# -- the webhook's deadline ---------------------------------------------------------------
def post_timed(client, body: str = QUESTION, **form_extra: str):  # type: ignore[no-untyped-def]
    form = inbound_form(body, **form_extra)
    started = time.monotonic()
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    return response, time.monotonic() - started


def test_a_model_that_stalls_mid_response_cannot_outlast_the_deadline(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    """httpx's timeout applies per read: a trickling or stalled body used to hold the webhook."""
    model.script({"content": ANSWER * 20, "stall_s": 20})
    client = create_app(make_settings(LLM_TIMEOUT_S=5.0, WEBHOOK_DEADLINE_S=4.0, REDIS_TIMEOUT_S=0.2)).test_client()
    response, elapsed = post_timed(client)
    assert messages(response) == [FALLBACK_REPLY]
    assert elapsed < 4.0 + BUSY_SLACK_S  # not the 20 s stall


def test_a_redis_that_stalls_cannot_outlast_the_deadline(make_settings, model) -> None:  # type: ignore[no-untyped-def]
    """A Redis that accepts connections and never answers (a hung server, a full network buffer)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # read nothing, answer nothing
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        model.script({"content": ANSWER})
        url = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
        client = create_app(make_settings(REDIS_URL=url, REDIS_TIMEOUT_S=0.25, WEBHOOK_DEADLINE_S=5.0)).test_client()
        response, elapsed = post_timed(client)
        assert messages(response) == [ANSWER]  # answered without memory
        assert elapsed < 5.0 + BUSY_SLACK_S  # the Redis never answers
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()


def test_waiting_for_an_attempt_in_flight_stops_at_the_deadline(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    client = create_app(make_settings(DEDUP_WAIT_S=30.0, WEBHOOK_DEADLINE_S=3.0, REDIS_TIMEOUT_S=0.2)).test_client()
    form = inbound_form(QUESTION)
    services = client.application.extensions["bot.services"]
    services.store.claim(USER, form["MessageSid"])  # a first attempt is still in flight
    started = time.monotonic()
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 200 and messages(response) == []
    assert time.monotonic() - started < 3.0 + BUSY_SLACK_S and model.requests() == []  # not DEDUP_WAIT_S's 30 s
