"""The console's pages with Flask's test client: what each shows, escaped."""

from __future__ import annotations

import html
import json
import re
import time

import pytest
from structlog.testing import capture_logs

from bot import create_app
from bot.storage.keys import CONTEXT_PREFIX, FACTS_PREFIX, MEMORY_PREFIX, user_key
from bot.storage.records import Fact, Pair
from bot.users.directory import reindex
from tests.conftest import USER
from tests.ops.console.support import SECRET, TOKEN, say, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)">'
OTHER = "+447700900123"


def page(client, path: str) -> str:  # type: ignore[no-untyped-def]
    response = client.get(path)
    assert response.status_code == 200, response.data[:300]
    return response.get_data(as_text=True)


def test_overview_counts_answered_messages_users_spend_and_draws_the_chart(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, MODEL_PRICES='{"gpt-4o-mini": [150000, 600000]}')
    app = create_app(settings)
    for body in ("What is a good walk near Lisbon this weekend?", "And where can I have lunch after it?"):
        model.script({"content": "Try the Sintra hills, then lunch in the old town."})
        assert say(app, body).status_code == 200
    client = app.test_client()
    sign_in(client)
    text = page(client, "/console/")
    tiles = re.findall(r'<p class="big">([^<]+)</p>', text)
    assert tiles[0] == "2"  # answered this hour
    assert tiles[1] == "1"  # active users in the last hour
    assert tiles[2].startswith("$") and tiles[2] != "$0.0000"  # priced usage today
    assert "2</strong> in the last 24 hours" in text
    assert text.count('<rect class="bar"') == 24
    assert "UTC: 2 answered</title>" in text  # the current hour's bar
    assert "<span>summaries</span> 0 waiting" in text and "<span>user state" in text


def test_users_list_search_flags_and_pages(console, redis_client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), mapping={
        "last_interaction_timestamp": now - 60,
        "recent_messages": json.dumps([Pair("hi", "hello", now, n=1).to_obj(), Pair("a", "b", now, n=2).to_obj()]),
    })
    redis_client.hset(user_key(FACTS_PREFIX, USER), mapping={"name": Fact(key="name", value="Ana", confidence=0.9).to_json()})
    redis_client.hset(user_key(MEMORY_PREFIX, USER), mapping={"opted_out": "1", "task_off": "1"})
    redis_client.hset(user_key(CONTEXT_PREFIX, OTHER), mapping={"last_interaction_timestamp": now - 7200})
    redis_client.hset(f"chat_handover:{{{OTHER}}}", mapping={"by": "console:admin", "since": now})
    assert USER not in page(console, "/console/users")  # stored before the index: not listed until...
    assert reindex(console.application.extensions["bot.services"].users) == 2  # ...`users reindex`
    text = page(console, "/console/users")
    assert text.index(USER) < text.index(OTHER)  # newest activity first
    row = text[text.index(USER):text.index(OTHER)]
    assert '<td class="num" data-label="Stored pairs">2</td>' in row and '<td class="num" data-label="Facts">1</td>' in row
    assert "opted out" in row and "task off" in row and "handed over" not in row
    assert "handed over" in text[text.index(OTHER):]
    searched = page(console, "/console/users?q=+44 7700")
    assert OTHER in searched and USER not in searched
    assert "No user" in page(console, "/console/users?q=999999")
    from bot.users import directory
    monkeypatch.setattr(directory, "PAGE_SIZE", 1)
    first, second = page(console, "/console/users"), page(console, "/console/users?page=2")
    assert USER in first and OTHER not in first and "Page 1 of 2" in first
    assert OTHER in second and USER not in second


def test_one_user_shows_conversation_facts_entities_usage_and_task(console_app, console, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "Alfama is lovely in spring."})
    say(console_app, "Where should I stay in Lisbon?")
    now = time.time()
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), mapping={"summary": "Planning a trip to Lisbon in May.",
                                                               "last_task": "find a hotel in Lisbon"})
    redis_client.hset(user_key(FACTS_PREFIX, USER), mapping={
        "city": Fact(key="city", value="Lisbon", category="location", confidence=0.92, importance=0.7, source="auto",
                     provenance="#1", created_at=now, updated_at=now, conflict={"value": "Porto", "confidence": 0.85}).to_json(),
    })
    text = page(console, f"/console/users/{USER}")
    for shown in ("Planning a trip to Lisbon in May.", "Where should I stay in Lisbon?", "Alfama is lovely in spring.",
                  "city", "Lisbon", "location", "0.92", "0.70", "#1", "Conflict: “Porto”", "find a hotel in Lisbon",
                  "reply", "Take over", "Reset conversation", "Erase all data", "Download export (JSON)"):
        assert html.escape(shown, quote=False) in text, shown


def test_the_task_call_line_states_one_truth(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    """TASK_EXTRACTION is off here: the line says so, never "On for this user" beside it."""
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "summary", "x")
    line = re.sub(r"\s+", " ", page(console, f"/console/users/{USER}").split("<dt>Task call</dt>")[1].split("<form")[0])
    assert "Off for everyone (<code>TASK_EXTRACTION=off</code>)" in line and "On for this user" not in line


def test_spoken_and_photo_turns_are_marked(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    pairs = [Pair("🎤 book a table for two", "Done.", now, n=1), Pair("[Photo] my dog Rex", "What a dog!", now, n=2)]
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), mapping={
        "recent_messages": json.dumps([p.to_obj() for p in pairs]), "last_interaction_timestamp": now, "seq": 2})
    text = page(console, f"/console/users/{USER}")
    assert 'title="A voice message, transcribed">voice message<' in text and 'title="A photo, with its caption">photo<' in text
    assert '<div class="text">book a table for two</div>' in text and '<div class="text">my dog Rex</div>' in text


def test_user_text_is_escaped_everywhere(console_app, console, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": f"You said {HOSTILE}"})
    say(console_app, f"hello {HOSTILE}")
    redis_client.hset(user_key(FACTS_PREFIX, USER), mapping={
        "nickname": Fact(key="nickname", value=HOSTILE, confidence=0.9).to_json()})
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), mapping={"summary": HOSTILE, "last_task": HOSTILE})
    text = page(console, f"/console/users/{USER}")
    assert "<script>alert" not in text and "<img src=x" not in text and 'onerror="alert' not in text
    assert text.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") >= 4  # message, reply, summary, fact, task


def test_a_user_with_nothing_stored_and_a_bad_number(console) -> None:  # type: ignore[no-untyped-def]
    assert "nothing stored" in page(console, f"/console/users/{USER}")
    assert console.get("/console/users/14155550100").status_code == 404
    assert console.get("/console/users/<script>").status_code == 404


def test_export_downloads_json_and_is_audited(console_app, console, model) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "Noted: trams it is, the 28 is the classic one to ride."})
    say(console_app, "Remember that I like trams.")
    with capture_logs() as logs:
        response = console.get(f"/console/users/{USER}/export.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["Content-Disposition"] == 'attachment; filename="export-14155550100.json"'
    exported = json.loads(response.data)
    assert exported["user"] == USER and exported["conversation"]["pairs"][0]["user"] == "Remember that I like trams."
    (audit,) = [e for e in logs if e["event"] == "audit.export"]
    assert audit["actor"] == "console:admin" and USER not in str(audit)


def fail_a_job(services, job_id: str = "summary-abcdef0123456789-tok"):  # type: ignore[no-untyped-def]
    """Run a job that fails on the real queue Redis with RQ's SimpleWorker; return its queue."""
    from rq import SimpleWorker

    from bot.jobs.queue import SUMMARY_QUEUE

    queue = services.jobs.queues[SUMMARY_QUEUE]
    queue.enqueue_call("tests.ops.console.support.failing_job", args=(USER, "tok"), job_id=job_id, failure_ttl=600)
    SimpleWorker([queue], connection=queue.connection).work(burst=True, with_scheduler=False)
    assert job_id in queue.failed_job_registry
    return queue


def test_queues_page_lists_failed_jobs_without_their_arguments(console, services) -> None:  # type: ignore[no-untyped-def]
    fail_a_job(services)
    text = page(console, "/console/queues")
    assert "summary-abcdef0123456789-tok" in text and "ValueError: cannot summarize +14*******00" in text
    assert '<td data-label="Kind">summary</td><td data-label="Queue">summaries</td>' in text and " s ago</td>" in text
    assert USER not in text and "14155550100" not in text
    assert "Requeue" in text and "Delete" in text


def test_the_user_page_shows_a_deferred_message_being_answered(console_app, console, redis_client) -> None:  # type: ignore[no-untyped-def]
    services = console_app.extensions["bot.services"]
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "last_interaction_timestamp", time.time())
    services.deferred.push(USER, "MM" + "1" * 32, {"user": USER, "body": "", "kind": "voice", "at": time.time() - 3})
    text = page(console, f"/console/users/{USER}")
    assert "voice note being answered" in text and 'title="MM' in text


def test_overview_flags_the_deliveries_that_failed_with_their_reasons(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    import time

    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET))
    activity = app.extensions["bot.services"].activity
    for code in ("63016", "63016", "21610"):
        activity.delivery_failed(time.time(), code)
    activity.delivery_failed(time.time() - 2 * 86_400, "63003")  # two days ago: not counted
    client = app.test_client()
    sign_in(client)
    text = page(client, "/console/")
    assert '<p class="big bad">3</p>' in text
    assert "outside WhatsApp&#39;s 24-hour window" in text and "the user unsubscribed (replied STOP)" in text
    assert "could not find the user" not in text
