"""Fixtures: a real Redis, the model stand-in over HTTP, signed Twilio requests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.request import urlopen

import fakeredis
import pytest
import redis
from twilio.request_validator import RequestValidator

from bot import create_app
from bot.config import Settings, load_settings
from bot.dev.embedded import free_port, start_embedded_redis, start_redis_cluster
from bot.dev.embedding_server import EmbeddingServer, start_embedding_server
from bot.dev.processes import TAG_VAR, ensure_tag, stop_tagged
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.services import build_services
from bot.storage.connection import make_redis
from bot.storage.records import Fact
from tests.support import fail_session

#: The cluster pass's selection and its checks, and make test-quick's (docs/testing.md).
pytest_plugins = ["tests.cluster_pass", "tests.passes"]

AUTH_TOKEN = "test-auth-token-0123456789abcdef"
#: The Twilio account of the tests: the Messages API and Media URLs of the Twilio stand-in.
ACCOUNT = "AC" + "1" * 32
USER = "+14155550100"
#: What a busy machine may add to a deadline in the tests that check one (docs/testing.md): each
#: such test makes the failure it guards against take 20 s or more, so this slack never hides it.
BUSY_SLACK_S = 2.0


def stored_facts(client, user: str = USER) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Return a user's facts as stored, packed or not (bot/storage/packed_facts.py)."""
    from bot.storage import packed_facts
    from bot.storage.keys import FACTS_PREFIX, VECTORS_PREFIX, user_key

    return packed_facts.read(client, user_key(FACTS_PREFIX, user), user_key(VECTORS_PREFIX, user))[0]
BASE_URL = "http://localhost"


def pytest_configure(config: pytest.Config) -> None:
    """Tag every process this run starts (bot/dev/processes.py), to find any left behind."""
    ensure_tag()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process it started is still running after the last teardown."""
    left = stop_tagged(os.environ[TAG_VAR])
    if left:
        fail_session(session, "processes left running by the tests (now stopped):", left)


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment() -> Iterator[None]:
    """Keep the developer's own settings (API keys, REDIS_URL…) out of the tests."""
    saved = {name: os.environ.pop(name) for name in list(Settings.model_fields) if name in os.environ}
    yield
    os.environ.update(saved)


#: TEST_REDIS_TOPOLOGY=cluster runs the tests with user state on a 3-master Redis Cluster
#: the fixtures start, and RQ on the standalone test Redis (what production does at scale).
CLUSTER = os.environ.get("TEST_REDIS_TOPOLOGY", "single") == "cluster"


@pytest.fixture(scope="session")
def queue_redis_url() -> Iterator[str]:
    """Return TEST_REDIS_URL, else the URL of a private redis-server started for this run.
    It holds everything with a single Redis, and RQ's queues with a cluster."""
    url = os.environ.get("TEST_REDIS_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="bot-test-redis-") as tmp:
        embedded = start_embedded_redis(Path(tmp) / "test.db")
        try:
            yield embedded.url
        finally:
            embedded.stop()


@pytest.fixture(scope="session")
def redis_url(queue_redis_url: str) -> Iterator[str]:
    """Return the URL of user state: the test Redis, or a node of the test cluster."""
    if not CLUSTER:
        yield queue_redis_url
        return
    with tempfile.TemporaryDirectory(prefix="bot-test-cluster-") as tmp:
        cluster = start_redis_cluster(Path(tmp))
        try:
            yield cluster.url
        finally:
            cluster.stop()


def redis_env(redis_url: str, queue_redis_url: str) -> dict[str, str]:
    """The Redis settings of a process the tests start (a CLI, a worker)."""
    return {"REDIS_URL": redis_url, **({"QUEUE_REDIS_URL": queue_redis_url} if CLUSTER else {})}


def user_state_client(url: str, decode_responses: bool = True):  # type: ignore[no-untyped-def]
    """A client on user state, a cluster client when the tests run on one."""
    return make_redis(url, decode_responses=decode_responses, cluster=CLUSTER)


@pytest.fixture
def redis_client(redis_url: str, queue_redis_url: str) -> Iterator[redis.Redis]:
    """A client on the real test Redis (user state), every node and the queue Redis flushed
    before and after each test."""
    client = user_state_client(redis_url)
    queue = redis.Redis.from_url(queue_redis_url)

    def flush() -> None:
        if CLUSTER:
            client.flushdb(target_nodes=client.PRIMARIES)
            queue.flushdb()
        else:
            client.flushdb()

    flush()
    yield client
    flush()
    client.close()
    queue.close()


@pytest.fixture
def fake_redis() -> fakeredis.FakeRedis:
    """A fresh in-memory Redis for unit tests of storage logic."""
    return fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)


@pytest.fixture(scope="session")
def standin_server() -> Iterator[StandinModel]:
    """The OpenAI-compatible stand-in, served over HTTP on 127.0.0.1 for the session."""
    model = StandinModel().start()
    yield model
    model.stop()


@pytest.fixture(autouse=True)
def _embeddings_when_asked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `embeddings` gets the real model in every pass, the cluster's included."""
    if request.node.get_closest_marker("embeddings") is not None:
        monkeypatch.delenv("TEST_EMBEDDINGS", raising=False)
        monkeypatch.delenv("EMBEDDING_MODEL", raising=False)


@pytest.fixture(scope="session", autouse=True)
def embedding_server(_isolated_environment: None) -> Iterator[EmbeddingServer]:
    """The real local embedding model (multilingual-e5-small), served on 127.0.0.1 for the
    session as the Procfile's `embed` process serves it; the processes the tests start (the
    CLI, workers, gunicorn) reach it through EMBEDDING_BASE_URL."""
    # Two threads: the tests wait on each call (production's one thread is for a busy host).
    server = start_embedding_server(threads=2)
    os.environ["EMBEDDING_BASE_URL"] = server.url
    if os.environ.get("TEST_EMBEDDINGS") == "off":  # the cluster pass: the CLI and workers too
        os.environ["EMBEDDING_MODEL"] = "off"
    yield server
    os.environ.pop("EMBEDDING_BASE_URL", None)
    os.environ.pop("EMBEDDING_MODEL", None)
    server.stop()


@pytest.fixture
def model(standin_server: StandinModel) -> Iterator[StandinModel]:
    """The stand-in with an empty script and no recorded requests."""
    standin_server.reset()
    standin_server.latency_s = 0.0
    yield standin_server
    standin_server.reset()


@pytest.fixture
def make_settings(
    redis_url: str, queue_redis_url: str, standin_server: StandinModel, embedding_server: EmbeddingServer
) -> Callable[..., Settings]:
    """Build settings for tests: real Redis, the stand-in model, the real local embedding
    model, overrides on top."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": standin_server.url,
            "EMBEDDING_BASE_URL": embedding_server.url,
            # The cluster pass (Makefile) tests topology: meaning only where a test asks for it
            # (@pytest.mark.embeddings), so the suite stays within its time.
            **({"EMBEDDING_MODEL": "off"} if os.environ.get("TEST_EMBEDDINGS") == "off" else {}),
            "REDIS_URL": redis_url,
            "QUEUE_REDIS_URL": queue_redis_url if CLUSTER else None,
            "LLM_TIMEOUT_S": 2.0,
            "LLM_MAX_RETRIES": 0,
            "DEDUP_WAIT_S": 3.0,
            # Retries run at once in tests; production waits 10, 30, 60 s (scheduler).
            "SUMMARY_RETRY_INTERVALS": "0,0,0",
            # Fact extraction has its own tests; elsewhere it would consume scripted answers.
            "EXTRACTION_INTERVAL": 0,
            # ...and, where they turn it on, it runs at once, not after the user's pause.
            "EXTRACTION_IDLE_S": 0,
            # Tests send bursts from one user; the rate limit has its own tests.
            "RATE_LIMIT_PER_MINUTE": 0,
            # Deferred replies have their own tests (tests/channels/twilio/test_deferred.py); elsewhere
            # media stay on the webhook's clock, the path of a bot without the Messages API.
            "DEFERRED_REPLIES": False,
            # Reminders have their own tests (tests/reminders/); elsewhere a reply is one plain
            # model call, as without the business's tools (their four tools and the time line).
            "REMINDERS": False,
            # ...and where a test turns them on, typing indicators never leave the machine.
            "TWILIO_MESSAGING_BASE_URL": "http://127.0.0.1:9",
            "LOG_LEVEL": "DEBUG",
        }
        values.update(overrides)
        # What give_workers put in the environment is for the jobs, not for the next settings
        # a test makes (the environment fills every setting not given here).
        hidden = {name: os.environ.pop(name) for name in _GIVEN if name in os.environ}
        try:
            return load_settings(env_files=False, **values)
        finally:
            os.environ.update(hidden)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """Default test settings."""
    return make_settings()


@pytest.fixture
def app(settings: Settings, redis_client: redis.Redis, model: StandinModel):  # type: ignore[no-untyped-def]
    """The Flask app on the real Redis and the stand-in model."""
    return create_app(settings)


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    """A Flask test client."""
    return app.test_client()


def new_sid() -> str:
    """Return a fresh Twilio-shaped MessageSid."""
    return "SM" + uuid.uuid4().hex


def inbound_form(body: str = "", user: str = USER, sid: str | None = None, **extra: str) -> dict[str, str]:
    """Return the form Twilio posts for an inbound WhatsApp message."""
    form = {
        "From": f"whatsapp:{user}",
        "To": "whatsapp:+14155238886",
        "Body": body,
        "MessageSid": sid or new_sid(),
        "AccountSid": "AC" + "0" * 32,
        "NumMedia": "0",
        "ProfileName": "Test User",
        "WaId": user.lstrip("+"),
    }
    form.update(extra)
    return form


def fact(key: str, value: str, confidence: float = 0.9, importance: float = 0.5, source: str = "auto",
         category: str = "other", **kw: Any) -> Fact:
    """Return a Fact with test defaults."""
    return Fact(key=key, value=value, confidence=confidence, importance=importance, source=source,
                category=category, **kw)


def sign(form: dict[str, str], url: str = f"{BASE_URL}/whatsapp", token: str = AUTH_TOKEN) -> str:
    """Return the X-Twilio-Signature Twilio would send."""
    return RequestValidator(token).compute_signature(url, form)


@pytest.fixture
def send(client):  # type: ignore[no-untyped-def]
    """Post a signed inbound message to /whatsapp and return the response."""

    def post(body: str = "", user: str = USER, sid: str | None = None, **extra: str):  # type: ignore[no-untyped-def]
        form = inbound_form(body, user, sid, **extra)
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})

    return post


@pytest.fixture
def twilio() -> Iterator[TwilioStandin]:
    """The local Twilio stand-in (Messages API, Media URLs behind basic auth and a CDN
    redirect) for ACCOUNT, on 127.0.0.1."""
    standin = TwilioStandin(ACCOUNT, AUTH_TOKEN).start()
    yield standin
    standin.stop()


@pytest.fixture
def services(settings: Settings, redis_client: redis.Redis):  # type: ignore[no-untyped-def]
    """The collaborators the app uses, for reading state in assertions."""
    return build_services(settings)


#: The settings give_workers put in the environment (make_settings leaves them out).
_GIVEN: set[str] = set()


def give_workers(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give RQ jobs these settings through the environment, as a worker process gets them,
    and drop what the job module built from the settings before."""
    import workers.jobs

    for name, value in settings.model_dump().items():
        if value is None:
            monkeypatch.delenv(name, raising=False)  # not one left from settings given before
        else:
            monkeypatch.setenv(name, str(value))
            _GIVEN.add(name)
    workers.jobs.services.cache_clear()
    workers.jobs.deferred_replies.cache_clear()
    workers.jobs.message_sender.cache_clear()


@pytest.fixture
def worker_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Give RQ jobs the same settings through the environment, as a worker process gets them."""
    import workers.jobs

    give_workers(settings, monkeypatch)
    yield settings
    workers.jobs.services.cache_clear()
    workers.jobs.deferred_replies.cache_clear()
    workers.jobs.message_sender.cache_clear()


@pytest.fixture
def chat_with(make_settings, redis_client, model, monkeypatch, run_worker):  # type: ignore[no-untyped-def]
    """build(**settings) -> say(body) -> the reply's body: an app with these settings (its
    workers given the same), messages posted signed as Twilio signs them."""
    import workers.jobs

    def build(**overrides):  # type: ignore[no-untyped-def]
        settings = make_settings(**overrides)
        give_workers(settings, monkeypatch)
        client = create_app(settings).test_client()

        def say(body: str) -> str:
            form = inbound_form(body)
            response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
            assert response.status_code == 200
            return response.get_data(as_text=True)

        return say

    yield build
    workers.jobs.services.cache_clear()


@pytest.fixture
def run_worker(worker_env: Settings):  # type: ignore[no-untyped-def]
    """Run queued jobs to completion with RQ's SimpleWorker on the real Redis."""
    from rq import Queue, SimpleWorker

    from bot.jobs.queue import FACTS_QUEUE, REPLIES_QUEUE, SUMMARY_QUEUE

    connection = make_redis(worker_env.queue_redis_url, decode_responses=False)

    def work(*names: str) -> bool:
        queues = [Queue(name, connection=connection) for name in (names or (REPLIES_QUEUE, SUMMARY_QUEUE, FACTS_QUEUE))]
        return SimpleWorker(queues, connection=connection).work(burst=True, with_scheduler=False)

    yield work
    connection.close()


def scheduled(queue_redis_url: str, queue_name: str) -> dict[str, float]:
    """Return the delayed jobs of a queue: job id -> when it is due (RQ's whole seconds)."""
    from rq import Queue

    connection = make_redis(queue_redis_url, decode_responses=False)
    try:
        registry = Queue(queue_name, connection=connection).scheduled_job_registry
        return {k.decode(): v for k, v in connection.zrange(registry.key, 0, -1, withscores=True)}
    finally:
        connection.close()


def enqueue_due(queue_redis_url: str, queue_name: str) -> None:
    """Move the delayed jobs that are due into their queue, as the worker's scheduler does."""
    from rq.scheduler import RQScheduler

    connection = make_redis(queue_redis_url, decode_responses=False)
    scheduler = RQScheduler([queue_name], connection=connection)
    scheduler.acquire_locks()
    try:
        scheduler.enqueue_scheduled_jobs()
    finally:
        scheduler.release_locks()
        connection.close()


def run_when_due(queue_redis_url: str, queue_name: str, run_worker: Callable[..., bool],
                 until: Callable[[], bool] | None = None, ceiling_s: float = 30.0) -> None:
    """Wait until the first delayed job of the queue is due by its own schedule (whatever the
    machine's speed; the ceiling is for a hang), move the due jobs into the queue as the
    worker's scheduler does, and run the queue; with `until`, again (a job that looks again
    later delays itself) until it holds."""
    deadline = time.monotonic() + ceiling_s
    while True:
        due = min(scheduled(queue_redis_url, queue_name).values(), default=None)
        assert due is not None, f"no delayed job in {queue_name}"
        while time.time() < due and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, due - time.time())))
        enqueue_due(queue_redis_url, queue_name)
        run_worker(queue_name)
        if until is None or until() or time.monotonic() > deadline:
            return


@contextmanager
def gunicorn_serving(settings: Settings, **env: str) -> Iterator[str]:
    """The app under gunicorn with two gthread worker processes, as the Procfile runs it;
    yields its base URL once /healthz answers."""
    port = free_port()
    full_env = {**os.environ, **{k: str(v) for k, v in settings.model_dump().items() if v is not None}}
    full_env.update(LOG_LEVEL="WARNING", **env)
    gunicorn = Path(sys.executable).parent / "gunicorn"
    proc = subprocess.Popen(
        [str(gunicorn), "--workers", "2", "--worker-class", "gthread", "--threads", "4", "-c", "python:bot.gunicorn_conf",
         "--bind", f"127.0.0.1:{port}", "bot:create_app()"],
        env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                with urlopen(f"{url}/healthz", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


#: The example clinic's today in tests (a Monday): every slot of the days after it is ahead.
CLINIC_TODAY = date(2030, 1, 7)


@pytest.fixture()
def clinic() -> Iterator[tuple[Any, str]]:
    """The example clinic API (bot/dev/clinic_api.py) on 127.0.0.1: (its server, its URL)."""
    from bot.dev.clinic_api import serve

    port = free_port()
    server = serve("127.0.0.1", port, today=CLINIC_TODAY)
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
