"""The console's counters through the signed webhook: answered messages per hour, model usage
per day (the reply path's and the background jobs'); commands and handover silences are not
answers; a Redis error costs the count, never the reply."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from structlog.testing import capture_logs

from bot.dev.standin import StandinModel
from bot.exceptions import StoreUnavailable
from bot.storage.activity import ActivityStore
from bot.storage.handover import PERSON, USER as USER_ROLE, LogEntry
from bot.users.handover import hand_back, take_over
from tests.conftest import USER

pytestmark = pytest.mark.integration


def answered(services) -> int:  # type: ignore[no-untyped-def]
    return sum(count for _, count in services.activity.answered(2, time.time()))


def usage_today(services) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {row.purpose: row.calls for row in services.activity.usage_on(datetime.now(timezone.utc))}


def test_answers_and_their_usage_are_counted_but_not_commands_or_silences(send, services, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    assert send("What should I see in Porto in one day?").status_code == 200
    assert send("And where should I eat?").status_code == 200
    assert answered(services) == 2 and usage_today(services) == {"reply": 2}
    send("/reset")  # a command: not an answer
    take_over(services.users, services.handover, USER, actor="cli", via="cli")
    send("Is anyone there?")  # the notice
    send("Hello?")  # silence
    assert answered(services) == 2 and usage_today(services) == {"reply": 2}
    hand_back(services.users, services.handover, USER, actor="cli", via="cli")
    send("Thanks, one more question about trains?")
    assert answered(services) == 3 and usage_today(services) == {"reply": 3}
    assert len(model.requests()) == 3


def test_a_redis_error_costs_the_count_not_the_reply(send, services, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise StoreUnavailable("connection reset")

    monkeypatch.setattr(ActivityStore, "record", broken)
    with capture_logs() as logs:
        response = send("What is the weather like in Faro in March?")
    assert response.status_code == 200 and b"<Message>" in response.data
    assert [e for e in logs if e["event"] == "activity.not_counted"]
    assert services.store.load(USER).recent  # the pair is stored all the same


def test_a_fold_that_makes_a_summary_due_queues_it_and_the_jobs_usage_counts(  # type: ignore[no-untyped-def]
    services, model: StandinModel, run_worker
) -> None:
    take_over(services.users, services.handover, USER, actor="cli", via="cli")
    for i in range(services.settings.SUMMARY_EVERY_N_PAIRS):
        services.handover.append(USER, LogEntry(USER_ROLE, f"Question {i} about my refund", time.time()))
        services.handover.append(USER, LogEntry(PERSON, f"Answer {i}", time.time(), by="ana", status="delivered"))
    assert hand_back(services.users, services.handover, USER, actor="cli", via="cli") == 10
    model.script({"content": "The user asked about a refund; the team answered.", "match": "Current summary:"})
    run_worker()
    assert "refund" in services.store.load(USER).summary
    assert usage_today(services) == {"summary": 1}
