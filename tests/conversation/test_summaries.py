"""Rolling summaries through RQ: a burst worker on the real Redis, the stand-in over HTTP."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from rq import Queue
from rq.registry import FailedJobRegistry
from structlog.testing import capture_logs

from bot import create_app
from bot.jobs.queue import SUMMARY_QUEUE
from bot.storage.triggers import SUMMARY as SUMMARY_JOB
from bot.storage.connection import make_redis
from bot.dev.standin import StandinModel
from tests.conftest import USER, give_workers, inbound_form, run_when_due, scheduled, sign

pytestmark = pytest.mark.integration

SUMMARY = "The user is planning a week in Lisbon in May and wants quiet places to stay."
#: Only the summary job's request contains this (bot.summary.render_transcript).
SUMMARY_MARK = "Current summary:"


def chat(send, model: StandinModel, n: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + n):
        model.script({"content": f"Here is a useful answer about Lisbon, number {i}.", "match": f"#{i} "})
        assert send(f"Question #{i} about my trip to Lisbon?").status_code == 200


def summary_requests(model: StandinModel) -> list[dict]:
    return [r for r in model.requests() if SUMMARY_MARK in r["messages"][-1]["content"]]


def services_token(services) -> str:  # type: ignore[no-untyped-def]
    return services.store.load(USER).summary_job_token


def queue(queue_redis_url: str) -> Queue:
    return Queue(SUMMARY_QUEUE, connection=make_redis(queue_redis_url, decode_responses=False))


@pytest.mark.cluster
def test_nth_pair_enqueues_one_job_that_summarizes_all_pending(  # type: ignore[no-untyped-def]
    send, model: StandinModel, services, run_worker, queue_redis_url
) -> None:
    chat(send, model, 9)
    assert queue(queue_redis_url).count == 0
    chat(send, model, 1, start=9)
    assert queue(queue_redis_url).count == 1
    model.script({"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    [request] = summary_requests(model)
    transcript = request["messages"][1]["content"]
    assert all(f"Question #{i} " in transcript for i in range(10))  # all ten, not just the last five
    prompt = request["messages"][0]["content"]
    assert "greetings" in prompt and "goals" in prompt and "recommendations" in prompt
    context = services.store.load(USER)
    assert context.summary == SUMMARY and context.count_since_summary == 0
    assert services.store.pending_pairs(USER) == []
    assert len(context.recent) == 5  # the recent window stays for verbatim context


@pytest.mark.cluster
def test_next_reply_prompt_carries_the_summary(send, model: StandinModel, run_worker) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 10)
    model.script({"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    model.reset()
    send("So where exactly should I stay?")
    prompt = model.requests()[0]["messages"]
    assert SUMMARY in prompt[1]["content"] and prompt[1]["role"] == "system"


@pytest.mark.cluster
def test_pairs_arriving_during_the_job_are_kept_and_counted(  # type: ignore[no-untyped-def]
    send, model: StandinModel, services, run_worker
) -> None:
    chat(send, model, 10)
    # The summary call is slow; three pairs arrive while it runs.
    model.script({"content": SUMMARY, "delay_s": 1.0, "match": SUMMARY_MARK})

    def user_keeps_writing() -> None:
        for _ in range(100):  # until the job has read its snapshot and called the model
            if summary_requests(model):
                break
            threading.Event().wait(0.02)
        chat(send, model, 3, start=10)

    writer = threading.Thread(target=user_keeps_writing)
    writer.start()
    run_worker()  # RQ workers handle signals, so they run in the main thread
    writer.join(10)
    context = services.store.load(USER)
    assert context.summary == SUMMARY
    assert context.count_since_summary == 3
    pending = services.store.pending_pairs(USER)
    assert ["#10 " in p.user or "#11 " in p.user or "#12 " in p.user for p in pending] == [True] * 3
    [request] = summary_requests(model)
    assert "#10 " not in request["messages"][1]["content"]  # never summarized twice


@pytest.mark.cluster
def test_concurrent_messages_crossing_the_threshold_enqueue_one_job(  # type: ignore[no-untyped-def]
    client, model: StandinModel, queue_redis_url, services
) -> None:
    model.latency_s = 0.1
    forms = [inbound_form(f"Concurrent question {i} about Lisbon hotels") for i in range(25)]

    def post(form):  # type: ignore[no-untyped-def]
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)}).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        assert set(pool.map(post, forms)) == {200}
    q = queue(queue_redis_url)
    token = services_token(services)
    assert q.count == 1 and q.job_ids == [services.jobs.job_id(SUMMARY_JOB, USER, token)]


@pytest.mark.cluster
def test_redelivery_does_not_enqueue_twice(send, model: StandinModel, services, queue_redis_url) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 9)
    model.reset()
    form = inbound_form("Question #9 about my trip to Lisbon?")
    for _ in range(3):
        send(form["Body"], sid=form["MessageSid"])
    assert queue(queue_redis_url).count == 1
    assert len(model.requests()) == 1  # one model call, not three
    assert services.store.load(USER).count_since_summary == 10


@pytest.mark.cluster
def test_model_failure_leaves_state_and_retries(  # type: ignore[no-untyped-def]
    send, model: StandinModel, services, run_worker, queue_redis_url
) -> None:
    chat(send, model, 10)
    before = services.store.snapshot(USER)
    job_id = services.jobs.job_id(SUMMARY_JOB, USER, before.token)
    model.script(*[{"status": status, "match": SUMMARY_MARK} for status in (500, 503, 500, 500)])
    with capture_logs() as logs:
        run_worker()  # retries are immediate with SUMMARY_RETRY_INTERVALS=0 (see settings)
    after = services.store.snapshot(USER)
    # nothing consumed, nothing lost
    assert (after.summary, after.pending, after.summarized_seq) == (before.summary, before.pending, before.summarized_seq)
    failed = FailedJobRegistry(SUMMARY_QUEUE, connection=make_redis(queue_redis_url, decode_responses=False))
    assert job_id in failed.get_job_ids()
    assert "14155550100" not in job_id  # job ids (and so RQ's own logs) carry no numbers
    events = [e for e in logs if e["event"] == "summary.failed"]
    assert events and events[-1]["final"] is True
    # after the last retry the trigger is free: the next pair enqueues a fresh job
    chat(send, model, 1, start=10)
    assert queue(queue_redis_url).count == 1
    model.script({"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    assert services.store.load(USER).summary == SUMMARY
    assert services.store.load(USER).count_since_summary == 0


def test_transient_failure_is_retried_to_success(send, model: StandinModel, services, run_worker) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 10)
    model.script({"status": 500, "match": SUMMARY_MARK}, {"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    assert services.store.load(USER).summary == SUMMARY


@pytest.mark.cluster
def test_lost_job_is_picked_up_at_the_next_trigger(send, model: StandinModel, services, run_worker, queue_redis_url) -> None:  # type: ignore[no-untyped-def]
    """A job lost with its queue (Redis restarted without persistence, say) changed nothing;
    once its trigger lease lapses, the next pair queues a new one. (A killed worker process
    is in test_worker_kill.py.)"""
    chat(send, model, 10)
    q = queue(queue_redis_url)
    q.empty()  # the job vanished with its worker
    before = services.store.snapshot(USER)
    assert len(before.pending) == 10
    # Age the trigger past its lease, as the clock would.
    services.redis.hset(f"chat_context:{{{USER}}}", "summary_job_at", 1.0)
    chat(send, model, 1, start=10)
    assert q.count == 1
    model.script({"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    assert services.store.load(USER).count_since_summary == 0
    assert SUMMARY == services.store.load(USER).summary


def test_summary_is_capped_in_tokens(send, model: StandinModel, services, run_worker) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 10)
    model.script({"content": "The user talked about Lisbon. " * 300, "match": SUMMARY_MARK})
    run_worker()
    summary = services.store.load(USER).summary
    assert services.counter.count(summary) <= services.settings.SUMMARY_MAX_TOKENS + 1
    model.reset()
    send("Any last tips for my trip to Lisbon?")
    from bot.llm.tokens import TokenCounter

    assert TokenCounter("gpt-4o-mini").count_messages(model.requests()[0]["messages"]) <= 800


@pytest.mark.cluster
def test_topic_shift_compresses_the_old_topic(send, model: StandinModel, services, run_worker) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 3)
    model.reset()
    with capture_logs() as logs:
        send("New topic: can you suggest a simple pasta recipe for dinner?")
    # the new topic is answered without the old pairs verbatim
    assert [m["role"] for m in model.requests()[0]["messages"]] == ["system", "user"]
    assert any(e["event"] == "topic.shift" and e["summary_queued"] for e in logs)
    model.script({"content": "The user planned a trip to Lisbon.", "match": SUMMARY_MARK})
    run_worker()
    context = services.store.load(USER)
    assert context.summary == "The user planned a trip to Lisbon."
    assert [p.user for p in context.recent] == ["New topic: can you suggest a simple pasta recipe for dinner?"]
    assert "pasta" not in summary_requests(model)[0]["messages"][1]["content"]


@pytest.mark.cluster
def test_topic_shift_takes_over_a_queued_summary(send, model: StandinModel, services, run_worker, queue_redis_url) -> None:  # type: ignore[no-untyped-def]
    chat(send, model, 10)  # a regular summary job is queued now
    send("Change of subject: what is a good beginner houseplant?")
    assert queue(queue_redis_url).count == 2
    model.script({"content": "The user planned a Lisbon trip.", "match": SUMMARY_MARK},
                 {"content": "The user planned a Lisbon trip.", "match": SUMMARY_MARK})
    run_worker()
    context = services.store.load(USER)
    assert context.summary == "The user planned a Lisbon trip."
    assert [p.user for p in context.recent] == ["Change of subject: what is a good beginner houseplant?"]
    assert len(summary_requests(model)) == 1  # the superseded job stopped before calling the model


@pytest.mark.cluster
def test_topic_shift_right_after_a_summary_still_clears_the_window(  # type: ignore[no-untyped-def]
    send, model: StandinModel, services, run_worker
) -> None:
    chat(send, model, 10)
    model.script({"content": SUMMARY, "match": SUMMARY_MARK})
    run_worker()
    assert services.store.pending_pairs(USER) == [] and len(services.store.load(USER).recent) == 5
    send("New topic: how do I repot a cactus safely?")
    run_worker()
    context = services.store.load(USER)
    assert context.summary == SUMMARY
    assert [p.user for p in context.recent] == ["New topic: how do I repot a cactus safely?"]


@pytest.mark.cluster
def test_queue_failure_never_fails_the_reply_and_frees_the_trigger(  # type: ignore[no-untyped-def]
    app, send, model: StandinModel, services, monkeypatch, queue_redis_url
) -> None:
    import redis as redis_lib

    jobs = app.extensions["bot.services"].jobs

    def down(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise redis_lib.ConnectionError("queue unreachable")

    monkeypatch.setattr(jobs, "enqueue", down)
    chat(send, model, 10)  # the 10th pair's enqueue fails...
    assert services.store.load(USER).summary_job_at is None  # ...and the trigger is free again
    monkeypatch.undo()
    chat(send, model, 1, start=10)
    assert queue(queue_redis_url).count == 1


# -- the idle summary ------------------------------------------------------------------
@pytest.fixture
def idle_send(make_settings, redis_client, model, monkeypatch, run_worker):  # type: ignore[no-untyped-def]
    """Send with SUMMARY_IDLE_S=3, and give the worker the same settings (after run_worker has
    given it the defaults)."""
    import workers.jobs

    settings = make_settings(SUMMARY_IDLE_S=3)
    give_workers(settings, monkeypatch)
    client = create_app(settings).test_client()

    def post(body: str):  # type: ignore[no-untyped-def]
        form = inbound_form(body)
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})

    yield post
    workers.jobs.services.cache_clear()


@pytest.mark.cluster
def test_a_quiet_user_keeps_only_the_summary_and_the_recent_window(  # type: ignore[no-untyped-def]
    idle_send, model: StandinModel, services, run_worker, queue_redis_url, redis_client
) -> None:
    for i in range(7):  # 2 pairs leave the 5-pair window; no summary is due yet
        idle_send(f"Question {i}: what else should we see in Lisbon?")
    assert redis_client.llen(f"chat_pending:{{{USER}}}") == 2 and not services.store.load(USER).summary
    [due] = scheduled(queue_redis_url, SUMMARY_QUEUE).values()
    while time.time() < due:  # the idle look is due: the user writes once more just then
        time.sleep(0.05)
    idle_send("One more: is the tram 28 worth it with kids?")
    run_when_due(queue_redis_url, SUMMARY_QUEUE, run_worker)
    assert not services.store.load(USER).summary  # it looked, found the user active, looks later
    [again] = scheduled(queue_redis_url, SUMMARY_QUEUE).values()
    assert again > due  # a full pause after the last message
    run_when_due(queue_redis_url, SUMMARY_QUEUE, run_worker, until=lambda: bool(services.store.load(USER).summary))
    context = services.store.load(USER)
    assert context.summary and context.summarized_seq == 8 and context.count_since_summary == 0
    assert redis_client.llen(f"chat_pending:{{{USER}}}") == 0 and len(context.recent) == 5
    assert len(summary_requests(model)) == 1


def test_an_idle_fold_that_fails_is_retried_and_frees_the_summary_trigger(  # type: ignore[no-untyped-def]
    idle_send, model: StandinModel, services, run_worker, queue_redis_url, redis_client
) -> None:
    for i in range(7):
        idle_send(f"Question {i}: what else should we see in Lisbon?")
    model.script({"status": 500, "match": SUMMARY_MARK})  # the first fold fails; RQ retries it
    run_when_due(queue_redis_url, SUMMARY_QUEUE, run_worker, until=lambda: bool(services.store.load(USER).summary))
    context = services.store.load(USER)
    assert context.summary and context.summarized_seq == 7 and context.summary_job_token is None
    assert redis_client.llen(f"chat_pending:{{{USER}}}") == 0 and len(summary_requests(model)) == 2
