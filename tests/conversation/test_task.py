"""Task extraction before the reply (docs/tasks.md), through the signed webhook, the real
openai client and the stand-in; and usage accounting by purpose."""

from __future__ import annotations

import json
import time

import pytest

from bot import create_app
from bot.conversation.prompt import RESOLVED_PREFIX
from bot.conversation.replies import TASK_OFF_REPLY, TASK_ON_REPLY
from bot.conversation.task import parse_task
from bot.dev.standin import StandinModel
from bot.storage.usage import decode_usage
from bot.storage.keys import USAGE_PREFIX, user_key
from tests.conftest import BUSY_SLACK_S, USER

pytestmark = pytest.mark.integration

TASK_MARK = "Known fact keys:"


def task_answer(task: str, history: bool, memory: bool, **extra: object) -> dict:  # type: ignore[type-arg]
    body = {"task": task, "depends_on_chat_history": history, "depends_on_user_memory": memory, "entities": []}
    return {"content": json.dumps(body), "match": TASK_MARK, **extra}


@pytest.fixture
def chat(chat_with, run_worker):  # type: ignore[no-untyped-def]
    """(build, work): build(**settings) gives say() on an app with task extraction on."""
    return (lambda **overrides: chat_with(TASK_EXTRACTION="on", **overrides)), run_worker


def calls(model: StandinModel) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    """Each request to the stand-in, named task or reply (or other)."""
    out = []
    for request in model.requests():
        last = request["messages"][-1]["content"]
        kind = "task" if TASK_MARK in last else ("reply" if "response_format" not in request else "other")
        out.append((kind, request))
    return out


def test_the_task_comes_first_and_shapes_the_reply_prompt(chat, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    say = chat[0]()
    say("What's the weather like in Lisbon today? I want to walk around Alfama.")
    model.reset()
    model.script(task_answer("Compare today's weather in Lisbon with yesterday's.", history=False, memory=False))
    say("How does that compare to yesterday?")
    kinds = [kind for kind, _ in calls(model)]
    assert kinds == ["task", "reply"]
    task_request = calls(model)[0][1]["messages"][-1]["content"]
    assert "Alfama" in task_request and "New message:" in task_request  # it saw the conversation
    reply = calls(model)[1][1]["messages"]
    resolved = [m["content"] for m in reply if m["content"].startswith(RESOLVED_PREFIX)]
    assert resolved and "yesterday's" in resolved[0]
    assert reply[-1] == {"role": "user", "content": "How does that compare to yesterday?"}  # their words stay
    assert not any("Alfama" in m["content"] for m in reply)  # the history the task said it does not need
    assert services.store.load(USER).last_task == "Compare today's weather in Lisbon with yesterday's."
    say("/reset")
    assert services.store.load(USER).last_task == ""  # a reset clears it with the conversation


def test_history_stays_when_the_task_needs_it(chat, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    say = chat[0]()
    say("What's the weather like in Lisbon today? I want to walk around Alfama.")
    model.reset()
    model.script(task_answer("Say whether to bring an umbrella to Alfama today.", history=True, memory=True))
    say("Should I bring an umbrella then?")
    reply = calls(model)[-1][1]["messages"]
    assert any("Alfama" in m["content"] for m in reply if m["role"] == "user")


def test_task_off_skips_the_call_and_task_on_brings_it_back(chat, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    say = chat[0]()
    assert TASK_OFF_REPLY.split(":")[0] in say("/task:off")
    model.reset()
    say("Any ideas for dinner tonight?")
    assert [kind for kind, _ in calls(model)] == ["reply"]
    assert services.meta.meta(USER).get("task_off") == "1"
    assert TASK_ON_REPLY.split(":")[0] in say("/task:on")
    model.reset()
    say("Any ideas for lunch tomorrow?")
    assert [kind for kind, _ in calls(model)] == ["task", "reply"]


@pytest.mark.parametrize("failure", [{"status": 500}, {"delay_s": 30}, {"content": "not json at all"}])
def test_a_failing_task_call_still_gives_a_normal_reply_in_time(chat, model: StandinModel, failure: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    say = chat[0](TASK_DEADLINE_S=1.5)
    say("What's the weather like in Lisbon today? I want to walk around Alfama.")
    model.reset()
    model.script(*[{"match": TASK_MARK, **failure}] * 3)
    started = time.monotonic()
    reply = say("How does that compare to yesterday?")
    took = time.monotonic() - started
    assert "canned reply" in reply and took < 1.5 + BUSY_SLACK_S  # the deadline, then the reply: not 30 s
    task_calls = [k for k, _ in calls(model) if k == "task"]
    assert len(task_calls) == (1 if "content" in failure else len(task_calls))  # never retried when invalid
    if "status" in failure:
        assert len(task_calls) >= 2  # a 500 is tried again
    reply_request = calls(model)[-1][1]["messages"]
    assert any("Alfama" in m["content"] for m in reply_request)  # the bypass: full context


def test_usage_matches_what_the_model_reported_for_every_call(chat, model: StandinModel, redis_client) -> None:  # type: ignore[no-untyped-def]
    build, work = chat
    say = build(EXTRACTION_INTERVAL=1, SUMMARY_EVERY_N_PAIRS=2, RECENT_PAIRS=1)
    model.reset()
    for text in ("My name is Ana and I live in Porto.", "I have a dog named Rex.", "What should I cook tonight?"):
        say(text)
    work()  # summary, facts, entities
    stored = {(u.purpose, u.model): u for u in decode_usage(redis_client.hgetall(user_key(USAGE_PREFIX, USER)))}
    reported: dict[str, list[int]] = {}
    for r in model.reported():
        last = r["last_user"]
        purpose = ("task" if TASK_MARK in last else "facts" if "Known facts:" in last
                   else "entities" if "Known entities:" in last else "summary" if "New exchanges:" in last else "reply")
        reported.setdefault(purpose, [0, 0, 0])
        reported[purpose] = [a + b for a, b in zip(reported[purpose], [r["prompt_tokens"], r["completion_tokens"], 1])]
    assert set(reported) == {"reply", "task", "summary", "facts", "entities"}
    for purpose, (prompt, completion, n) in reported.items():
        [row] = [u for (p, _m), u in stored.items() if p == purpose]
        assert (row.prompt_tokens, row.completion_tokens, row.calls) == (prompt, completion, n), purpose


def test_the_lenient_parser_takes_fences_and_refuses_what_does_not_fit() -> None:
    body = '{"task": "x", "depends_on_chat_history": false, "depends_on_user_memory": true, "entities": []}'
    assert parse_task("```json\n" + body + "\n```").depends_on_user_memory is True
    assert parse_task("Sure! " + body + " Hope it helps") is not None
    assert parse_task('{"task": "x"}') is None and parse_task("nothing") is None


@pytest.mark.cluster
def test_operators_turn_it_off_per_user_and_read_usage(make_settings, redis_client, model, services, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess

    from tests.cli_support import run_cli

    from tests.conftest import AUTH_TOKEN, redis_env

    token = "admin-token-0123456789abcdef"
    admin = create_app(make_settings(ADMIN_TOKEN=token)).test_client()
    auth = {"Authorization": f"Bearer {token}"}
    assert admin.put(f"/admin/users/{USER}/task", json={"enabled": "no"}, headers=auth).status_code == 400
    assert admin.put(f"/admin/users/{USER}/task", json={"enabled": False}, headers=auth).json["task_extraction"] == "off"
    assert services.meta.meta(USER).get("task_off") == "1"
    services.usage.add(USER, "reply", "gpt-4o", 1000, 200)
    services.usage.add(USER, "task", "gpt-4o-mini", 400, 50)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, OPENAI_API_KEY="k", OPENAI_BASE_URL=model.url,
               MODEL_PRICES='{"gpt-4o": [2.5, 10], "gpt-4o-mini": [0.15, 0.6]}',
               **redis_env(str(services.settings.REDIS_URL), services.settings.queue_redis_url))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env, tmp_path)

    one = json.loads(cli("usage", USER, "--json").stdout)
    assert one["total"]["cost_usd"] == pytest.approx((1000 * 2.5 + 200 * 10 + 400 * 0.15 + 50 * 0.6) / 1e6)
    top = json.loads(cli("usage", "--json").stdout)
    assert top["users"][0]["user"] == USER and top["priced"] is True
    assert cli("task", USER, "on").returncode == 0 and services.meta.meta(USER).get("task_off") is None


def test_a_task_that_only_repeats_the_message_adds_no_line(chat, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    say = chat[0]()
    model.script(task_answer("What is the capital of Peru?", history=False, memory=False))
    say("What is the capital of Peru")
    reply = calls(model)[-1][1]["messages"]
    assert not any(m["content"].startswith(RESOLVED_PREFIX) for m in reply)


def test_the_check_drops_only_one_word_names_found_as_written() -> None:
    from bot.conversation.task import ExtractedTask, checked_by_task
    from bot.memory.matching import EntityIndex
    from bot.storage.entities import Entity

    entities = {e.key: e for e in [
        Entity("PET:kinako", "Kinako", "PET", [], 0.9, ["dog"]), Entity("PERSON:ana silva", "Ana Silva", "PERSON", [], 0.9, ["sister"]),
        Entity("PET:rex", "Rex", "PET", [], 0.9, ["dog2"])]}
    matches = EntityIndex(entities.values()).match("can i put kinako powder in oats for ana silva and rexy", 0.85)
    assert {m.key: m.strategy for m in matches} == {"PET:kinako": "normalized", "PERSON:ana silva": "normalized",
                                                     "PET:rex": "fuzzy"}
    task = ExtractedTask(task="t", depends_on_chat_history=False, depends_on_user_memory=True, entities=[])
    kept, dropped = checked_by_task(task, matches, entities)
    assert [m.key for m in dropped] == ["PET:kinako"]  # two words and a misspelling stay
    named = ExtractedTask.model_validate({**task.model_dump(), "entities": [{"name": "kinako", "type": "PET"}]})
    assert checked_by_task(named, matches, entities)[1] == []
    silent = parse_task('{"task": "t", "depends_on_chat_history": false, "depends_on_user_memory": true}')
    assert silent is not None and checked_by_task(silent, matches, entities)[1] == []  # no list: nothing said
