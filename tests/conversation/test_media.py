"""Voice notes, photos and locations through the signed webhook, end to end, on the path
production runs: the webhook acknowledges a voice note or a photo at once (empty TwiML), and
a worker fetches it from the local Twilio stand-in (basic auth, a cross-origin redirect),
hears it for real through the stand-in model (faster-whisper, tiny.en) or shows it to the
vision call, and answers through the Messages API stand-in (docs/deferred.md). A few tests at
the end keep the webhook's own path, for a bot whose replies are not deferred."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from PIL import Image
from structlog.testing import capture_logs

from bot import create_app
from bot.conversation.messages import PHOTO_MARK, SPOKEN_MARK
from bot.conversation.replies import (
    MEDIA_FAILED_REPLY,
    NON_TEXT_REPLY,
    PHOTO_TOO_LARGE_REPLY,
    VOICE_FAILED_REPLY,
)
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import MediaBehaviour, TwilioStandin
from bot.llm.images import image_tokens
from bot.storage.keys import SESSION_FACTS_PREFIX, USAGE_PREFIX, user_key, user_keys
from tests.conftest import ACCOUNT, AUTH_TOKEN, USER, give_workers, inbound_form, sign

pytestmark = pytest.mark.integration

VOICE = (Path(__file__).resolve().parents[1] / "data" / "voice_ana.ogg").read_bytes()
OGG = "audio/ogg; codecs=opus"


def media_sid() -> str:
    import uuid

    return "MM" + uuid.uuid4().hex


def jpeg(width: int, height: int, color: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def media_settings(make_settings, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    """Settings as production has them for media: deferred replies through the Messages API
    stand-in, and the model's production timeouts (a photo is deferred too: its download and
    the vision call could outlast the webhook)."""
    def make(**overrides):  # type: ignore[no-untyped-def]
        values = dict(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url, TWILIO_MESSAGING_BASE_URL=twilio.url,
                      DEFERRED_REPLIES=True, LLM_TIMEOUT_S=5.0, LLM_MAX_RETRIES=1)
        return make_settings(**{**values, **overrides})

    return make


def media_fetches(twilio: TwilioStandin) -> list[dict]:
    """The requests for a Media URL on Twilio's API (not the sends, nor the typing indicator)."""
    return [h for h in twilio.hits() if h["server"] == "api" and "/Media/" in h["path"]]


def sent_to_user(twilio: TwilioStandin) -> list[str]:
    return [m["Body"] for m in twilio.messages() if m["To"] == f"whatsapp:{USER}"]


@pytest.fixture
def post_media(media_settings, redis_client, model, twilio: TwilioStandin, monkeypatch, run_worker):  # type: ignore[no-untyped-def]
    """post(data, content_type, body="", sid=None, app_settings...) -> (what the user got, how):
    "webhook" when the TwiML answered, else "api": the webhook acknowledged with empty TwiML,
    and the worker (RQ's SimpleWorker, given the same settings) answered by the Messages API."""
    apps: dict[str, object] = {}

    def post(data: bytes | None, content_type: str = OGG, body: str = "", sid: str | None = None,
             url: str | None = None, behaviour: MediaBehaviour | None = None, **overrides):  # type: ignore[no-untyped-def]
        settings = media_settings(**overrides)
        key = json.dumps(overrides, sort_keys=True)
        if key not in apps:
            apps[key] = create_app(settings).test_client()
        give_workers(settings, monkeypatch)
        client = apps[key]
        sid = sid or media_sid()
        media_url = url or (twilio.add_media(sid, data, content_type, behaviour) if data is not None else "")
        form = inbound_form(body, sid=sid, NumMedia="1", MediaContentType0=content_type, MediaUrl0=media_url)
        before = len(sent_to_user(twilio))
        response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})  # type: ignore[attr-defined]
        assert response.status_code == 200, response.data
        twiml = [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")]
        if twiml:
            return twiml, "webhook"
        run_worker()
        return sent_to_user(twilio)[before:], "api"

    return post


def last_user_content(model: StandinModel) -> object:
    replies = [r for r in model.requests() if not r.get("response_format")]
    return replies[-1]["messages"][-1]["content"]


# -- voice notes -----------------------------------------------------------------------
def test_a_voice_note_is_answered_from_its_transcript_and_stored_as_spoken(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    replies, how = post_media(VOICE)
    assert how == "api"  # acknowledged at once, answered by a worker
    prompt_text = last_user_content(model)
    assert isinstance(prompt_text, str) and "porto" in prompt_text.lower() and "name" in prompt_text.lower()
    assert replies[0].startswith(f"{SPOKEN_MARK}“") and "canned reply" in replies[0]  # what was heard, then the answer
    [pair] = services.store.load(USER).recent
    assert pair.user == f"{SPOKEN_MARK}{prompt_text}"
    assert "canned reply" in pair.assistant and SPOKEN_MARK not in pair.assistant  # the echo is not stored
    [transcription] = model.transcriptions()
    assert transcription["model"] == "gpt-4o-mini-transcribe" and transcription["filename"] == "voice.ogg"


def test_the_transcript_is_extracted_into_facts(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    post_media(VOICE, EXTRACTION_INTERVAL=1)  # the worker answers, then reads the pair for facts
    facts = services.facts.load(USER)
    assert re.search(r"\ban{1,2}a\b", facts["name"].value.lower())  # tiny.en hears "Anna"
    assert "porto" in facts["city"].value.lower()


def test_echo_can_be_turned_off_and_usage_counts_audio_seconds(post_media, model, redis_client) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "Nice to meet you, Ana! Porto is a lovely city by the river."})
    replies, _ = post_media(VOICE, VOICE_ECHO=False)
    assert replies == ["Nice to meet you, Ana! Porto is a lovely city by the river."]
    usage = redis_client.hgetall(user_key(USAGE_PREFIX, USER))
    assert usage["transcription|gpt-4o-mini-transcribe|calls"] == "1"
    assert int(usage["transcription|gpt-4o-mini-transcribe|sec"]) >= 3


def test_a_transcript_is_never_a_command(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", "content": "Delete my data"}, {"content": "I can help with that question."})
    replies, _ = post_media(VOICE, VOICE_ECHO=False)
    assert replies == ["I can help with that question."]  # answered by the model, not the erase warning
    assert services.meta.meta(USER).get("erase_requested_at") is None


def test_the_language_hint_is_the_setting_else_the_users_language(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    from bot.users.memory import set_fact

    set_fact(services.users, services.settings, USER, "language", "Portuguese")
    post_media(VOICE)
    post_media(VOICE, TRANSCRIPTION_LANGUAGE="es")
    assert [t["language"] for t in model.transcriptions()] == ["pt", "es"]


def test_a_redelivered_voice_note_is_fetched_and_transcribed_once(post_media, model, twilio) -> None:  # type: ignore[no-untyped-def]
    sid = media_sid()
    url = twilio.add_media(sid, VOICE, OGG)
    first, how = post_media(None, sid=sid, url=url)
    again, _ = post_media(None, sid=sid, url=url)
    assert how == "api" and len(first) == 1 and again == []  # answered once; the redelivery starts nothing
    assert len(media_fetches(twilio)) == 1
    assert len(model.transcriptions()) == 1
    assert len([r for r in model.requests() if not r.get("response_format")]) == 1


# -- failures: polite, in time, nothing stored -----------------------------------------------
def nothing_stored(services) -> bool:  # type: ignore[no-untyped-def]
    context = services.store.load(USER)
    return context.recent == [] and context.count_since_summary == 0 and services.store.pending_pairs(USER) == []


@pytest.mark.parametrize("script", [{"status": 500}, {"content": ""}, {"delay_s": 30.0}],
                         ids=["transcription_500", "empty_transcript", "transcription_timeout"])
def test_a_transcription_failure_is_polite_and_stores_nothing(post_media, model, services, script) -> None:  # type: ignore[no-untyped-def]
    model.script({"kind": "transcription", **script})  # a 30 s transcription: only the timeout can end it
    with capture_logs() as logs:
        replies, _ = post_media(VOICE, TRANSCRIPTION_TIMEOUT_S=1.0)
    assert replies == [VOICE_FAILED_REPLY]
    assert nothing_stored(services)
    assert [r for r in model.requests() if not r.get("response_format")] == []  # no reply call
    assert any(e["event"] == "transcription.failed" for e in logs)


def test_a_voice_note_too_long_is_not_transcribed(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    replies, _ = post_media(VOICE, VOICE_MAX_SECONDS=3)
    assert "shorter" in replies[0] and "3 seconds" in replies[0]
    assert model.transcriptions() == [] and nothing_stored(services)


def test_audio_that_is_not_audio_is_polite(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    replies, _ = post_media(b"OggS but not really" * 20)
    assert replies == [VOICE_FAILED_REPLY] and model.transcriptions() == [] and nothing_stored(services)


# -- photos ----------------------------------------------------------------------------
def image_part(model: StandinModel) -> tuple[str, dict]:
    content = last_user_content(model)
    assert isinstance(content, list)
    text = next(p["text"] for p in content if p["type"] == "text")
    image = next(p["image_url"] for p in content if p["type"] == "image_url")
    return text, image


def decode(data_url: str) -> Image.Image:
    header, _, payload = data_url.partition(",")
    assert header.startswith("data:image/") and header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def test_a_photo_reaches_the_model_downscaled_and_is_stored_as_text(post_media, model, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    replies, _ = post_media(jpeg(2000, 1500), "image/jpeg", body="What is this dish?")
    text, image = image_part(model)
    assert text == "What is this dish?" and image["detail"] == "low"
    sent = decode(image["url"])
    assert sent.size == (512, 384) and sent.format == "JPEG"
    assert sent.getpixel((10, 10))[0] > 150  # the photo's own colour, not a placeholder
    assert "512×384 JPEG" in replies[0]  # the stand-in answers from the image it got
    reply_call = [r for r in model.reported() if r["model"] == services.settings.vision_model][-1]
    assert reply_call["prompt_tokens"] >= 85
    [pair] = services.store.load(USER).recent
    assert pair.user == f"{PHOTO_MARK} What is this dish?"
    stored = json.dumps({k: str(redis_client.dump(k)) for k in user_keys(USER) if redis_client.exists(k)})
    assert "base64" not in stored and "data:image" not in stored


def test_high_detail_fits_the_prompt_budget(post_media, model) -> None:  # type: ignore[no-untyped-def]
    post_media(jpeg(2000, 1500), "image/jpeg", IMAGE_DETAIL="high", MAX_PROMPT_TOKENS=2000)
    _, roomy = image_part(model)
    assert roomy["detail"] == "high" and decode(roomy["url"]).size == (1024, 768)
    post_media(jpeg(2000, 1500), "image/jpeg", IMAGE_DETAIL="high", MAX_PROMPT_TOKENS=1000)
    _, middle = image_part(model)
    size = decode(middle["url"]).size
    assert middle["detail"] == "high" and 512 < max(size) < 1024
    assert image_tokens(*size, "high") <= 1000 - 200 - 200 - 20
    post_media(jpeg(2000, 1500), "image/jpeg", IMAGE_DETAIL="high")  # 800: one tile, which low shows for 85
    _, tight = image_part(model)
    assert tight["detail"] == "low" and decode(tight["url"]).size == (512, 384)


def test_a_photo_without_caption_is_asked_about_in_the_users_language(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    from bot.users.memory import set_fact

    post_media(jpeg(300, 300), "image/jpeg")
    assert image_part(model)[0] == "What is in this photo?"
    set_fact(services.users, services.settings, USER, "language", "Portuguese")
    post_media(jpeg(300, 300), "image/jpeg")
    assert image_part(model)[0] == "O que há nesta foto?"
    assert services.store.load(USER).recent[-1].user == PHOTO_MARK


def test_a_photo_over_the_cap_is_refused_by_its_header(post_media, model, services, twilio) -> None:  # type: ignore[no-untyped-def]
    replies, _ = post_media(b"\xff\xd8" + b"0" * 60_000, "image/jpeg", IMAGE_MAX_BYTES=50_000)
    assert replies == [PHOTO_TOO_LARGE_REPLY] and nothing_stored(services) and model.requests() == []


def test_vision_off_is_todays_polite_reply(post_media, model, twilio) -> None:  # type: ignore[no-untyped-def]
    replies, _ = post_media(jpeg(100, 100), "image/jpeg", VISION=False, VOICE=False)
    assert replies == [NON_TEXT_REPLY] and twilio.hits() == [] and model.requests() == []
    replies, _ = post_media(jpeg(100, 100), "image/jpeg", VISION=False)  # says what it can read
    assert "voice messages" in replies[0] and "photos" not in replies[0] and twilio.hits() == []


# -- fetching --------------------------------------------------------------------------
def test_a_foreign_media_url_is_never_requested(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    recorder = TwilioStandin(ACCOUNT, AUTH_TOKEN).start()  # any server that records its hits
    try:
        sid = media_sid()
        foreign = recorder.add_media(sid, VOICE, OGG)
        with capture_logs() as logs:
            replies, _ = post_media(None, sid=sid, url=foreign)
        assert replies == [MEDIA_FAILED_REPLY]
        assert recorder.hits() == [] and model.requests() == [] and nothing_stored(services)
        assert any(e["event"] == "media.refused" and e.get("reason") == "foreign_origin" for e in logs)
    finally:
        recorder.stop()


def test_a_media_url_of_another_message_is_refused(post_media, twilio, model) -> None:  # type: ignore[no-untyped-def]
    other = twilio.add_media(media_sid(), VOICE, OGG)
    replies, _ = post_media(None, url=other)
    assert replies == [MEDIA_FAILED_REPLY] and media_fetches(twilio) == []


def test_credentials_go_to_the_api_only(post_media, twilio) -> None:  # type: ignore[no-untyped-def]
    post_media(VOICE)
    api = media_fetches(twilio)
    cdn = [h for h in twilio.hits() if h["server"] == "cdn"]
    assert len(api) == 1 and api[0]["authorization"]
    assert len(cdn) == 1 and not cdn[0]["authorization"]


@pytest.mark.parametrize(
    ("behaviour", "reply"),
    [
        (MediaBehaviour(api_status=401), MEDIA_FAILED_REPLY),
        (MediaBehaviour(api_status=404), MEDIA_FAILED_REPLY),
        (MediaBehaviour(api_status=500), MEDIA_FAILED_REPLY),
        (MediaBehaviour(cdn_delay_s=30.0), MEDIA_FAILED_REPLY),  # a timeout
        (MediaBehaviour(piece_bytes=100, piece_gap_s=0.3), MEDIA_FAILED_REPLY),  # a trickle past the deadline
        (MediaBehaviour(cut_after=1000), MEDIA_FAILED_REPLY),  # a cut connection
        (MediaBehaviour(framing="chunked"), None),  # over the cap by stream: no Content-Length to go by
        (MediaBehaviour(cdn_redirects=10), MEDIA_FAILED_REPLY),
    ],
    ids=["401", "404", "500", "timeout", "trickle", "cut", "oversize_by_stream", "redirect_loop"],
)
def test_a_fetch_that_fails_is_polite_and_stores_nothing(post_media, model, services, behaviour, reply) -> None:  # type: ignore[no-untyped-def]
    cap = {"MEDIA_MAX_BYTES": 10_000} if behaviour.framing == "chunked" else {}
    data = VOICE * 2 if cap else VOICE  # 16 KB against a 10 KB cap
    with capture_logs() as logs:
        replies, _ = post_media(data, behaviour=behaviour, MEDIA_FETCH_TIMEOUT_S=1.0, **cap)
    if reply is None:  # over the cap: a voice note that long is asked for shorter
        assert "shorter" in replies[0]
    else:
        assert replies == [reply]  # a stalled CDN (30 s) or a trickle could only end by the fetch's deadline
    assert nothing_stored(services) and model.requests() == [] and model.transcriptions() == []
    assert any(e["event"] == "media.failed" for e in logs)


# -- locations, other attachments ---------------------------------------------------------
def test_a_shared_location_is_a_line_and_a_session_fact(send, model, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    send("what's good for lunch near here?", Latitude="41.1496", Longitude="-8.6109", Label="Café Majestic",
         Address="Rua de Santa Catarina 112, Porto")
    line = last_user_content(model)
    assert line == ("📍 Shared location: Café Majestic, Rua de Santa Catarina 112, Porto (41.14960, -8.61090)\n"
                    "what's good for lunch near here?")
    fact = services.facts.load(USER, "session")["current_location"]
    assert fact.value.startswith("Café Majestic") and fact.source == "explicit"
    assert redis_client.ttl(user_key(SESSION_FACTS_PREFIX, USER)) > 0  # it expires with the session
    send("", Latitude="38.7223", Longitude="-9.1393")  # a newer location replaces it
    assert services.facts.load(USER, "session")["current_location"].value == "38.72230, -9.13930"


def test_a_location_out_of_range_is_a_400(send, redis_client) -> None:  # type: ignore[no-untyped-def]
    assert send("", Latitude="91", Longitude="0").status_code == 400
    assert send("", Latitude="abc", Longitude="0").status_code == 400
    assert redis_client.dbsize() == 0


def test_an_opted_out_user_gets_no_location_fact(send, services) -> None:  # type: ignore[no-untyped-def]
    send("stop remembering me")
    send("", Latitude="41.1496", Longitude="-8.6109")
    assert "current_location" not in services.facts.load(USER, "session")


# -- erase, export, rest mode -----------------------------------------------------------
def test_export_and_erase_cover_the_transcript(post_media, send, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot.users.reports import export_user

    post_media(VOICE)
    exported = json.dumps(export_user(services.users, USER), ensure_ascii=False)
    assert f"{SPOKEN_MARK}Hello there" in exported
    send("delete my data")
    send("YES")
    left = [k for k in user_keys(USER) if redis_client.exists(k)]
    assert all("Porto" not in json.dumps(redis_client.hgetall(k)) for k in left if redis_client.type(k) == "hash")
    assert not any(redis_client.exists(k) for k in user_keys(USER) if not k.startswith("chat_seen"))


def test_rest_mode_answers_a_voice_note_the_same_way(media_settings, redis_client, model, twilio, services,  # type: ignore[no-untyped-def]
                                                    monkeypatch, run_worker) -> None:
    public = "https://bot.example.com"
    settings = media_settings(REPLY_MODE="rest", PUBLIC_BASE_URL=public)
    give_workers(settings, monkeypatch)
    app = create_app(settings)
    sid = media_sid()
    form = inbound_form("", sid=sid, NumMedia="1", MediaContentType0=OGG, MediaUrl0=twilio.add_media(sid, VOICE, OGG))
    try:
        response = app.test_client().post("/whatsapp", data=form,
                                          headers={"X-Twilio-Signature": sign(form, url=f"{public}/whatsapp")})
        assert response.status_code == 200 and b"<Message>" not in response.data
    finally:
        app.extensions["bot.replier"].close()
    run_worker()
    [sent] = sent_to_user(twilio)
    assert sent.startswith(f"{SPOKEN_MARK}“Hello there") and "canned reply" in sent
    assert services.store.load(USER).recent[0].user.startswith(SPOKEN_MARK)


# -- the webhook's own path: a bot whose replies are not deferred -------------------------
@pytest.fixture
def on_the_webhook(make_settings, redis_client, model, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    """post(data, content_type, body="", **settings) -> the TwiML replies, with DEFERRED_REPLIES
    off: the webhook fetches, hears or looks, and answers inside Twilio's clock."""
    def post(data: bytes, content_type: str = OGG, body: str = "", **overrides):  # type: ignore[no-untyped-def]
        settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url, DEFERRED_REPLIES=False,
                                 **overrides)
        sid = media_sid()
        form = inbound_form(body, sid=sid, NumMedia="1", MediaContentType0=content_type,
                            MediaUrl0=twilio.add_media(sid, data, content_type))
        response = create_app(settings).test_client().post("/whatsapp", data=form,
                                                            headers={"X-Twilio-Signature": sign(form)})
        assert response.status_code == 200, response.data
        return [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")]

    return post


def test_without_deferred_replies_a_voice_note_is_answered_on_the_webhook(on_the_webhook, model, services) -> None:  # type: ignore[no-untyped-def]
    # All of Twilio's clock, and a one-second model: about 12 s left to hear five seconds of speech.
    replies = on_the_webhook(VOICE, WEBHOOK_DEADLINE_S=14.5, LLM_TIMEOUT_S=1.0)
    assert replies[0].startswith(f"{SPOKEN_MARK}“") and "canned reply" in replies[0]
    assert services.store.load(USER).recent[0].user.startswith(SPOKEN_MARK)


def test_on_the_webhook_a_transcription_out_of_time_is_polite(on_the_webhook, model, services) -> None:  # type: ignore[no-untyped-def]
    model.gate.clear()  # the transcription never answers: only its timeout can end the wait
    try:
        replies = on_the_webhook(VOICE, TRANSCRIPTION_TIMEOUT_S=1.0)
    finally:
        model.gate.set()
    assert replies == [VOICE_FAILED_REPLY] and nothing_stored(services)


def test_without_deferred_replies_a_photo_is_seen_on_the_webhook(on_the_webhook, model) -> None:  # type: ignore[no-untyped-def]
    replies = on_the_webhook(jpeg(2000, 1500), "image/jpeg", body="What is this dish?")
    assert "512×384 JPEG" in replies[0] and image_part(model)[0] == "What is this dish?"


def test_a_spoken_yes_never_confirms_a_change(post_media, model, services) -> None:  # type: ignore[no-untyped-def]
    """Only the user's typed words confirm a write (docs/tools.md): a voice note's transcript
    saying yes drops the proposal instead, and nothing reaches the API."""
    import time
    from datetime import date

    from bot.dev.clinic_api import serve
    from bot.dev.embedded import free_port

    port = free_port()
    clinic = serve("127.0.0.1", port, today=date(2030, 1, 7))
    try:
        url = f"http://127.0.0.1:{port}"
        assert services.users.actions is not None
        services.users.actions.propose(USER, {"id": "act_spoken", "tool": "book_appointment", "summary": "Book it",
                                              "arguments": {"day": "2030-01-08", "time": "10:00"},
                                              "sid": "SMproposal", "at": time.time() - 1})
        model.script({"kind": "transcription", "content": "Sim, confirmo."})
        replies, _ = post_media(VOICE, TOOLS_OPENAPI=f"{url}/openapi.json", TOOLS_BASE_URL=url)
        assert not any(r.startswith(("Feito", "Done")) for r in replies)
        assert [r for r in clinic.clinic.requests if r["method"] == "POST"] == []
        assert services.users.actions.pending(USER) is None  # dropped: a voice note is not a yes
    finally:
        clinic.shutdown()
        clinic.server_close()
