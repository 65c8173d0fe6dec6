"""Coalesced fact extraction: one call per user once they pause (EXTRACTION_IDLE_S), or at
the next look once EXTRACTION_MAX_PAIRS pairs wait, over every pair not yet read."""

from __future__ import annotations

import time

import pytest
from rq import Queue

from bot import create_app
from bot.dev.standin import StandinModel
from bot.jobs.queue import FACTS_QUEUE
from bot.storage.connection import make_redis
from tests.conftest import USER, give_workers, inbound_form, run_when_due, scheduled, sign
from tests.memory.test_memory import EXTRACT_MARK

pytestmark = pytest.mark.integration

IDLE_S = 2


@pytest.fixture
def chat(make_settings, redis_client, model, monkeypatch, run_worker, queue_redis_url):  # type: ignore[no-untyped-def]
    """(send, run_when_due, queue): send a message; run the facts queue once its first delayed
    job is due (by its own schedule: no timed waits), until `until` holds if given."""
    import workers.jobs

    settings = make_settings(EXTRACTION_INTERVAL=1, EXTRACTION_IDLE_S=IDLE_S, EXTRACTION_MAX_PAIRS=8, SUMMARY_IDLE_S=0)
    give_workers(settings, monkeypatch)
    client = create_app(settings).test_client()
    connection = make_redis(queue_redis_url, decode_responses=False)

    def send(body: str) -> None:
        form = inbound_form(body)
        assert client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)}).status_code == 200

    def when_due(until=None) -> None:  # type: ignore[no-untyped-def]
        run_when_due(queue_redis_url, FACTS_QUEUE, run_worker, until=until)

    yield send, when_due, Queue(FACTS_QUEUE, connection=connection)
    workers.jobs.services.cache_clear()
    connection.close()


def extraction_requests(model: StandinModel) -> list[str]:
    return [r["messages"][-1]["content"] for r in model.requests() if EXTRACT_MARK in r["messages"][-1]["content"]]


@pytest.mark.cluster
def test_a_burst_is_read_by_one_call_once_the_user_pauses(chat, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    send, when_due, queue = chat
    for i in range(6):
        send(f"Message {i}: my trip to Lisbon needs planning, with museums and trams.")
    assert queue.count == 0  # one delayed job, waiting for the pause
    when_due(until=lambda: bool(extraction_requests(model)))
    [request] = extraction_requests(model)
    assert all(f"Message {i}:" in request for i in range(6))  # every unread pair, in one call


def test_max_pairs_run_at_the_next_look_even_if_the_user_never_pauses(chat, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    send, when_due, _ = chat
    for i in range(8):
        send(f"Message {i}: what else should I see in Porto this weekend?")
    send("Message 8: and how do I get there from Lisbon?")  # still writing
    when_due()  # the eighth pair made the job due now
    [request] = extraction_requests(model)
    assert "Message 0:" in request and "Message 7:" in request and "Message 8:" not in request  # the oldest 8
    when_due(until=lambda: len(extraction_requests(model)) > 1)  # the follow-up, after the pause
    assert "Message 8:" in extraction_requests(model)[-1]


@pytest.mark.cluster
def test_a_summary_waits_for_the_pairs_extraction_has_not_read(chat, model: StandinModel, run_worker, services) -> None:  # type: ignore[no-untyped-def]
    """A burst past SUMMARY_EVERY_N_PAIRS made the summary fold pairs that the waiting
    extraction had not read yet: their facts were lost. Now the summary keeps them and
    hurries the extraction, then folds them once read."""
    send, _look, queue = chat
    for i in range(12):  # the summary is due at the 10th; the extraction waits for a pause
        send(f"Message {i}: my trip to Lisbon needs planning, with museums and trams.")
    run_worker()  # summaries first, then facts; the delayed extraction is not due yet
    read = "\n".join(extraction_requests(model))
    assert all(f"Message {i}:" in read for i in range(12))  # every pair was read, none lost
    context = services.store.load(USER)
    meta = services.meta.meta(USER)
    assert 0 < context.summarized_seq <= int(meta["extracted_seq"]) == 12
    assert context.summary  # and the summary did come


@pytest.mark.cluster
def test_a_job_waiting_between_retries_is_not_hurried(chat, services) -> None:  # type: ignore[no-untyped-def]
    """Hurrying a failing job would give it fresh retries each time: it would never fail for
    good, and never free its trigger."""
    from rq.job import Job

    send, _look, queue = chat
    send("Message 0: my trip to Lisbon needs planning, with museums and trams.")
    token = services.store.trigger_tokens(USER)["extraction"]
    ident = services.jobs.job_id("extraction", USER, token)
    assert services.jobs.waiting_for_delay(ident)  # delayed for the user's pause: may be hurried
    job = Job.fetch(ident, connection=queue.connection)
    job.retries_left = job.retries_left - 1  # as RQ leaves it after a failed attempt
    job.save()
    assert not services.jobs.waiting_for_delay(ident)


def test_a_user_still_writing_moves_the_waiting_extraction_instead_of_waking_it(  # type: ignore[no-untyped-def]
        chat, model: StandinModel, queue_redis_url) -> None:
    """Each message moves the one waiting job to a full pause from now (one Redis command), so
    it never wakes up only to find the user still writing."""
    from bot.observability.metrics import EXTRACTIONS

    send, when_due, queue = chat
    looks = EXTRACTIONS.labels(result="waiting")._value.get()
    for i in range(6):  # 3 s of writing, more than the 2 s pause the job waits for
        sent_at = time.time()
        send(f"Message {i}: what should I pack for a week in the Azores in March?")
        [due] = scheduled(queue_redis_url, FACTS_QUEUE).values()  # one job, a full pause from this message
        assert due >= int(sent_at) + IDLE_S
        time.sleep(0.5)
    assert extraction_requests(model) == [] and queue.count == 0
    when_due(until=lambda: bool(extraction_requests(model)))
    [request] = extraction_requests(model)
    assert all(f"Message {i}:" in request for i in range(6))
    assert EXTRACTIONS.labels(result="waiting")._value.get() == looks  # not one look
