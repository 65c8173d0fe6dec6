"""The worker comes back by itself: after a Redis outage, and after being killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bot import create_app
from bot.dev.embedded import start_redis_server
from bot.dev.processes import stop_process
from bot.dev.standin import StandinModel
from bot.storage.keys import MEMORY_PREFIX, user_key
from tests.conftest import USER, inbound_form, sign
from tests.conversation.test_summaries import SUMMARY, SUMMARY_MARK, chat, summary_requests

pytestmark = pytest.mark.integration

RQ = str(Path(sys.executable).parent / "rq")


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process(proc, timeout_s=15)


def worker_env(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {**os.environ, **{k: str(v) for k, v in settings.model_dump().items() if v is not None}}


def test_the_supervisor_restarts_a_worker_that_keeps_exiting(tmp_path: Path, queue_redis_url: str) -> None:
    runs = tmp_path / "runs"
    child = f"import time; open({str(runs)!r}, 'a').write(f'{{time.time()}}\\n'); raise SystemExit(3)"
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "workers.supervise", sys.executable, "-c", child],
        env={**os.environ, "QUEUE_REDIS_URL": queue_redis_url}, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(runs.read_text().split() if runs.exists() else []) < 3:
            time.sleep(0.1)
        started = [float(t) for t in runs.read_text().split()]
    finally:
        stop(supervisor)
    assert len(started) >= 3  # restarted...
    assert started[2] - started[1] > started[1] - started[0]  # ...with a growing pause (1 s, then 2 s)
    assert supervisor.returncode == 3


def test_the_supervisor_runs_n_workers_and_stops_them_all(tmp_path: Path, queue_redis_url: str) -> None:
    pids = tmp_path / "pids"
    child = f"import os, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(60)"
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "workers.supervise", "--processes", "3", sys.executable, "-c", child],
        env={**os.environ, "QUEUE_REDIS_URL": queue_redis_url}, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(pids.read_text().split() if pids.exists() else []) < 3:
            time.sleep(0.1)
        running = [int(p) for p in pids.read_text().split()]
        assert len(set(running)) == 3
    finally:
        stop(supervisor)
    assert supervisor.returncode == 0
    for pid in running:  # each worker got the stop signal and is gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_work_resumes_within_seconds_of_redis_coming_back(
    make_settings, model: StandinModel, tmp_path: Path
) -> None:
    server = start_redis_server(tmp_path / "redis")
    url = server.url
    settings = make_settings(REDIS_URL=url, QUEUE_REDIS_URL=None, EXTRACTION_INTERVAL=1)
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "workers.supervise", RQ, "worker", "--worker-class", "workers.worker.BotWorker",
         "--url", url, "--logging_level", "WARNING", "summaries", "facts"],
        env=worker_env(settings), stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 30
        while not client.smembers("rq:workers") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.smembers("rq:workers"), "the worker never started"
        server.stop(signal.SIGKILL)  # Redis goes away, long enough for the worker to notice
        time.sleep(4)
        server.restart()
        back = time.monotonic()
        app = create_app(settings)
        form = inbound_form("I'm Ana, and I'd love ideas for a rainy Sunday in Lisbon.")
        assert app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)}).status_code == 200
        while client.hget(user_key(MEMORY_PREFIX, USER), "extracted_seq") != b"1" and time.monotonic() < back + 30:
            time.sleep(0.1)
        assert client.hget(user_key(MEMORY_PREFIX, USER), "extracted_seq") == b"1", "no job ran after Redis came back"
        # within seconds (about 5: docs/conversation.md); RQ's own wait grows to a minute
        assert time.monotonic() - back < 20
    finally:
        stop(supervisor)
        server.stop()
    assert supervisor.returncode is not None


#: Retries of model failures wait this long in the tests below: a job redone within their
#: ceilings was redone at once, as a death calls for, not after a backoff.
BACKOFF = "300,300,300"


def summary_due(make_settings, model: StandinModel) -> tuple:  # type: ignore[no-untyped-def]
    """Ten exchanges through an app whose jobs retry after BACKOFF: a summary job is queued,
    and its first model call hangs for a minute (it is killed there)."""
    settings = make_settings(SUMMARY_RETRY_INTERVALS=BACKOFF)
    client = create_app(settings).test_client()

    def send(body: str):  # type: ignore[no-untyped-def]
        form = inbound_form(body)
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})

    chat(send, model, 10)
    model.script({"content": "never stored", "delay_s": 60, "match": SUMMARY_MARK},
                 {"content": SUMMARY, "match": SUMMARY_MARK})
    return settings


def supervised_pool(settings, queue_redis_url: str, processes: int = 2, beat_s: int = 5,  # type: ignore[no-untyped-def]
                    maintain_s: int = 10) -> subprocess.Popen[bytes]:
    """The Procfile's worker: supervised RQ workers with its heartbeat and maintenance intervals."""
    command = [sys.executable, "-m", "workers.supervise", "--processes", str(processes), RQ, "worker",
               "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url, "--with-scheduler",
               "--job-monitoring-interval", str(beat_s), "--maintenance-interval", str(maintain_s),
               "--logging_level", "WARNING", "summaries"]
    return subprocess.Popen(command, env=worker_env(settings), stderr=subprocess.PIPE)


def wait_for_summary_call(model: StandinModel, calls: int = 1) -> None:
    deadline = time.monotonic() + 60  # a ceiling only a hang reaches
    while len(summary_requests(model)) < calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(summary_requests(model)) >= calls, "the job never reached the model"


def wait_for_summary(services) -> float:  # type: ignore[no-untyped-def]
    """Wait (at most a minute) for the summary to be stored; return how long it took."""
    started = time.monotonic()
    while services.store.load(USER).summary != SUMMARY and time.monotonic() < started + 60:
        time.sleep(0.1)
    return time.monotonic() - started


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process under it at once, as a container's OOM kill does."""
    import psutil

    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def killed_mid_summary(model: StandinModel, process: subprocess.Popen[bytes]) -> None:
    """Wait until the summary's model call is under way, then SIGKILL the process and all it
    started."""
    try:
        wait_for_summary_call(model)
        kill_tree(process.pid)
        process.wait(10)
    finally:
        stop(process)


def test_a_job_whose_worker_was_killed_is_redone_by_the_pool_at_once(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    """Two supervised workers with the Procfile's intervals (heartbeat 5 s, maintenance
    10 s): the one running the summary is killed with its work horse mid-call, the
    supervisor marks its job abandoned, and the pool redoes it once, without the backoff."""
    from rq.worker import Worker

    settings = summary_due(make_settings, model)
    supervisor = supervised_pool(settings, queue_redis_url)
    connection = redis.Redis.from_url(queue_redis_url)
    try:
        wait_for_summary_call(model)
        busy = next(w for w in Worker.all(connection=connection) if w.get_current_job_id())
        kill_tree(busy.pid)  # the worker and its work horse, mid-call; the supervisor lives
        redone_after = wait_for_summary(services)
    finally:
        stop(supervisor)
        connection.close()
    assert services.store.load(USER).summary == SUMMARY and redone_after < 30
    assert services.store.pending_pairs(USER) == [] and len(summary_requests(model)) == 2
    log = supervisor.stderr.read()
    assert b"worker.jobs_abandoned" in log and b"not found in Redis" not in log


@pytest.mark.cluster
def test_a_whole_worker_group_killed_mid_job_is_redone_once_by_the_next_one(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    """The supervisor, its workers and their work horses are all SIGKILLed mid-call, and a new
    supervisor starts: it finds this machine's dead workers, and the pool redoes the job at
    once, exactly once, with no `Execution … not found` on the way."""
    settings = summary_due(make_settings, model)
    killed_mid_summary(model, supervised_pool(settings, queue_redis_url))
    killed = time.monotonic()
    second = supervised_pool(settings, queue_redis_url)
    try:
        wait_for_summary(services)
        redone_after = time.monotonic() - killed
        time.sleep(0.5)  # a second run would have asked the model by now: none may
    finally:
        stop(second)
    assert services.store.load(USER).summary == SUMMARY and redone_after < 30
    assert services.store.pending_pairs(USER) == [] and len(summary_requests(model)) == 2
    log = second.stderr.read()
    assert b"dead_before_start" in log and b"not found in Redis" not in log, [l for l in log.splitlines() if b"supervise" in l]


def test_a_job_whose_heartbeat_ran_out_is_redone_at_once(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    """No supervisor saw the death (another machine's worker, say): the job's heartbeat runs
    out (3 x 1 s here), and the next maintenance redoes it at once, not after the backoff."""
    settings = summary_due(make_settings, model)
    command = [RQ, "worker", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url,
               "--job-monitoring-interval", "1", "--maintenance-interval", "1", "--logging_level", "WARNING",
               "summaries"]
    killed_mid_summary(model, subprocess.Popen(command, env=worker_env(settings), stderr=subprocess.DEVNULL))
    second = subprocess.Popen(command, env=worker_env(settings), stderr=subprocess.PIPE)
    try:
        wait_for_summary(services)
    finally:
        stop(second)
    assert services.store.load(USER).summary == SUMMARY and len(summary_requests(model)) == 2
    assert b"not found in Redis" not in second.stderr.read()


def test_an_idle_worker_comes_round_to_maintenance(settings, queue_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """Only between waits for work does a worker retry abandoned jobs and take over the
    scheduler of a worker that died; RQ's idle wait is 405 s, so a killed worker's job and
    every delayed job (retries, coalesced extraction) waited about seven minutes."""
    from rq.worker import Worker

    command = [RQ, "worker", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url,
               "--maintenance-interval", "1", "--logging_level", "WARNING", "summaries"]
    worker = subprocess.Popen(command, env=worker_env(settings), stderr=subprocess.DEVNULL)
    connection = redis.Redis.from_url(queue_redis_url)
    try:
        beats = []
        deadline = time.monotonic() + 30  # three beats take 3 s; RQ's own idle wait is 405 s
        while len(set(beats)) < 3 and time.monotonic() < deadline:  # it wakes, beats and maintains
            for found in Worker.all(connection=connection):
                if found.pid == worker.pid and found.last_heartbeat is not None:
                    beats.append(found.last_heartbeat)
            time.sleep(0.3)
        assert len(set(beats)) >= 3, "an idle worker kept waiting for work instead of coming round"
    finally:
        stop(worker)
        connection.close()


def test_after_a_model_outage_waiting_retries_run_as_soon_as_the_model_answers(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    """Every user's summary fails on the model and waits a 5-minute backoff; the worker's
    maintenance probes the model, finds it back and runs them all at once."""
    settings = make_settings(SUMMARY_RETRY_INTERVALS="300,300,300")
    client = create_app(settings).test_client()
    users = [f"+1415555{n:04d}" for n in range(3)]
    for user in users:
        for i in range(10):
            form = inbound_form(f"Question #{i} about my trip to Lisbon?", user=user)
            assert client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)}).status_code == 200
    model.script(*[{"status": 500, "match": SUMMARY_MARK}] * 3, *[{"content": SUMMARY, "match": SUMMARY_MARK}] * 3)
    command = [RQ, "worker", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url,
               "--with-scheduler", "--maintenance-interval", "1", "--logging_level", "WARNING", "summaries"]
    worker = subprocess.Popen(command, env=worker_env(settings), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(summary_requests(model)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        failed_at = time.monotonic()
        while time.monotonic() < failed_at + 60 and any(services.store.load(u).summary != SUMMARY for u in users):
            time.sleep(0.2)
    finally:
        stop(worker)
    assert all(services.store.load(u).summary == SUMMARY for u in users)  # not after the 5-minute backoff
    assert any(r["messages"][-1]["content"] == "ping" for r in model.requests())  # the probe
