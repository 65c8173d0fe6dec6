"""Every operator action on the console changes Redis as the CLI would, through the same user
operations, audit-logged with actor console:<operator> and the number masked."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bot.storage.keys import CONTEXT_PREFIX, FACTS_PREFIX, MEMORY_PREFIX, SESSION_FACTS_PREFIX, user_key
from bot.storage.records import Fact
from tests.conftest import USER, stored_facts
from tests.ops.console.support import OPERATOR, PASSWORD, add_operator, post, say, sign_in
from tests.ops.console.test_pages import fail_a_job

pytestmark = pytest.mark.integration

USER_PAGE = f"/console/users/{USER}"


def act(client, action: str, data: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """POST one action of the user's page, with the page's CSRF token; return the response."""
    return post(client, f"{USER_PAGE}/{action}", data, page=USER_PAGE)


def audits(logs: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in logs if e["event"].startswith("audit.")]


def talk(app, model) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "The 28 tram goes through Alfama; take it early in the morning."})
    assert say(app, "Which tram should I take to see the old town?").status_code == 200


def test_reset_clears_the_conversation_and_keeps_facts(console_app, console, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    talk(console_app, model)
    redis_client.hset(user_key(FACTS_PREFIX, USER), "name", Fact(key="name", value="Ana", confidence=0.9).to_json())
    with capture_logs() as logs:
        response = act(console, "reset")
    assert response.status_code == 302 and response.headers["Location"] == USER_PAGE
    context = redis_client.hgetall(user_key(CONTEXT_PREFIX, USER))
    assert context["recent_messages"] == "[]" and context["summary"] == ""
    assert "name" in stored_facts(redis_client)
    (audit,) = audits(logs)
    assert audit["event"] == "audit.reset" and audit["actor"] == "console:admin" and audit["via"] == "console"
    assert audit["target"] == "+14*******00"
    assert "Conversation cleared." in console.get(USER_PAGE).get_data(as_text=True)


def test_add_edit_and_delete_a_fact(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    with capture_logs() as logs:
        act(console, "facts", {"key": "Favourite Tram", "value": "28", "category": "", "importance": "0.6", "scope": "user"})
    stored = Fact.from_json("favourite_tram", stored_facts(redis_client)["favourite_tram"])
    assert stored is not None and stored.value == "28" and stored.category == "preference"
    assert stored.source == "operator" and stored.provenance == "console:admin" and stored.importance == 0.6
    assert audits(logs)[0]["event"] == "audit.fact_set" and audits(logs)[0]["actor"] == "console:admin"
    act(console, "facts", {"key": "favourite_tram", "value": "15E", "category": "preference", "importance": "0.6", "scope": "user"})
    edited = Fact.from_json("favourite_tram", stored_facts(redis_client)["favourite_tram"])
    assert edited is not None and edited.value == "15E" and edited.previous[0]["value"] == "28"
    act(console, "facts", {"key": "in_town", "value": "this week", "scope": "session", "importance": "0.5"})
    assert redis_client.hexists(user_key(SESSION_FACTS_PREFIX, USER), "in_town")
    with capture_logs() as logs:
        act(console, "facts/delete", {"key": "favourite_tram", "scope": "user"})
    assert "favourite_tram" not in stored_facts(redis_client)
    assert audits(logs)[0]["event"] == "audit.fact_deleted" and audits(logs)[0]["actor"] == "console:admin"


def test_a_bad_fact_is_refused_with_the_reason(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    for form, reason in (({"key": "x", "value": ""}, "value must be 1 to 300 characters"),
                         ({"key": "x", "value": "v", "importance": "high"}, "Importance must be a number"),
                         ({"key": "x", "value": "v", "importance": "2"}, "importance must be a number between 0 and 1"),
                         ({"key": "x", "value": "v", "category": "nope"}, "category must be one of")):
        response = act(console, "facts", form)
        assert response.status_code == 302
        assert reason in console.get(USER_PAGE).get_data(as_text=True), reason
    assert not redis_client.exists(user_key(FACTS_PREFIX, USER))


def test_opt_out_and_in_and_the_task_call(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    meta = user_key(MEMORY_PREFIX, USER)
    with capture_logs() as logs:
        act(console, "memory", {"opted_out": "1"})
        act(console, "task", {"enabled": "0"})
    assert redis_client.hget(meta, "opted_out") == "1" and redis_client.hget(meta, "task_off") == "1"
    assert [e["event"] for e in audits(logs)] == ["audit.memory_opt_out", "audit.task_off"]
    assert all(e["actor"] == "console:admin" for e in audits(logs))
    text = console.get(USER_PAGE).get_data(as_text=True)
    assert "opted out of memory" in text and "task call off" in text
    act(console, "memory", {"opted_out": "0"})
    act(console, "task", {"enabled": "1"})
    assert redis_client.hget(meta, "opted_out") is None and redis_client.hget(meta, "task_off") is None


def test_erase_needs_the_number_typed(console_app, console, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    talk(console_app, model)
    redis_client.hset(user_key(FACTS_PREFIX, USER), "name", Fact(key="name", value="Ana", confidence=0.9).to_json())
    keys = sorted(redis_client.scan_iter(match="*14155550100*"))
    for typed in ("", "+14155550101", "yes"):
        response = act(console, "erase", {"confirm": typed})
        assert response.headers["Location"] == f"{USER_PAGE}#erase"
        assert sorted(redis_client.scan_iter(match="*14155550100*")) == keys
    assert "Nothing erased" in console.get(USER_PAGE).get_data(as_text=True)
    with capture_logs() as logs:
        response = act(console, "erase", {"confirm": USER})
    assert response.headers["Location"] == "/console/users"
    assert list(redis_client.scan_iter(match="*14155550100*")) == []
    (audit,) = audits(logs)
    assert audit["event"] == "audit.erase" and audit["actor"] == "console:admin" and audit["keys_deleted"] >= 2
    assert USER not in str(logs)


def test_a_named_operator_is_the_actor(console_app, redis_client) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)
    client = console_app.test_client()
    sign_in(client, OPERATOR, PASSWORD)
    with capture_logs() as logs:
        act(client, "reset")
    assert audits(logs)[0]["actor"] == f"console:{OPERATOR}"


def test_requeue_and_delete_a_failed_job(console, services) -> None:  # type: ignore[no-untyped-def]
    queue = fail_a_job(services)
    with capture_logs() as logs:
        response = post(console, "/console/queues/summaries/failed/summary-abcdef0123456789-tok/requeue", page="/console/queues")
    assert response.status_code == 302
    assert "summary-abcdef0123456789-tok" not in queue.failed_job_registry
    assert "summary-abcdef0123456789-tok" in queue.get_job_ids()
    assert audits(logs)[0]["event"] == "audit.job_requeued" and audits(logs)[0]["actor"] == "console:admin"
    queue.empty()
    fail_a_job(services, "summary-abcdef0123456789-two")
    post(console, "/console/queues/summaries/failed/summary-abcdef0123456789-two/delete", page="/console/queues")
    assert "summary-abcdef0123456789-two" not in queue.failed_job_registry
    assert services.jobs.job_status("summary-abcdef0123456789-two") is None
    missing = post(console, "/console/queues/summaries/failed/summary-nope-x/delete", page="/console/queues")
    assert missing.status_code == 404
    assert post(console, "/console/queues/nope/failed/x/requeue", page="/console/queues").status_code == 404


def test_no_get_changes_anything(console_app, console, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    talk(console_app, model)
    before = {k: redis_client.dump(k) for k in redis_client.scan_iter(match="*14155550100*")}
    for rule in console_app.url_map.iter_rules():
        if rule.rule.startswith("/console") and "GET" in rule.methods and "<filename>" not in rule.rule:
            console.get(rule.rule.replace("<e164>", USER))
    after = {k: redis_client.dump(k) for k in redis_client.scan_iter(match="*14155550100*")}
    assert after.keys() == before.keys()


def test_a_fact_stored_under_an_old_synonym_is_edited_and_deleted_as_stored(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    """Keys stored before a synonym folded them (home_city is city now) stay editable."""
    from bot.memory.rules import MergeResult, MergeStats
    from bot.storage.facts import FactStore
    from bot.storage.records import Fact
    from tests.conftest import USER
    from tests.ops.console.support import post

    facts = FactStore(redis_client)
    redis_client.hset(f"user_facts:{{{USER}}}", mapping={
        "home_city": Fact("home_city", "Lisbon", "location", 0.9, 0.8, "auto").to_json(),
        "city": Fact("city", "Porto", "location", 0.9, 0.8, "auto").to_json(),
    })
    page = f"/console/users/{USER}"
    post(console, f"{page}/facts/delete", {"key": "home_city", "scope": "user"}, page)
    assert set(facts.load(USER)) == {"city"}  # the fact shown, not its canonical twin
    facts.merge(USER, "user", lambda existing: MergeResult(
        {"home_city": Fact("home_city", "Lisbon", "location", 0.9, 0.8, "auto")}, [], MergeStats()))
    post(console, f"{page}/facts", {"key": "home_city", "value": "Braga", "scope": "user"}, page)
    assert set(facts.load(USER)) == {"city"} and facts.load(USER)["city"].value == "Braga"
