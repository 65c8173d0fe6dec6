"""`whatsapp-bot inspect|chat`, run as a developer would: in this process with a
subprocess's environment (tests/cli_support.py), and in a real subprocess where the process
is the point (what `chat` imports, how it starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from bot.dev.standin import StandinModel
from tests.cli_support import run_cli
from tests.conftest import AUTH_TOKEN, USER, redis_env

pytestmark = pytest.mark.integration


@pytest.fixture
def server(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app served over real HTTP on 127.0.0.1; yields its port."""
    http = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield str(http.server_port)
    http.shutdown()
    thread.join(5)


@pytest.fixture
def run(redis_url: str, queue_redis_url: str, standin_server: StandinModel, redis_client, model, tmp_path, server):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(
        TWILIO_AUTH_TOKEN=AUTH_TOKEN,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=standin_server.url,
        **redis_env(redis_url, queue_redis_url),
        PORT=server,  # where `chat` finds the bot, as `make run` records it
    )

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_cli(args, env, tmp_path, stdin)

    return run


@pytest.mark.cluster
def test_chat_holds_a_conversation_then_inspect_shows_it(run, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    model.script(
        {"content": "Lisbon is lovely in spring; Alfama is a great area to stay in."},
        {"content": "In Porto, Ribeira by the river is the classic choice for visitors."},
    )
    chat = run("chat", "--user", USER, stdin="Where should I stay in Lisbon?\nAnd in Porto?\n")
    assert chat.returncode == 0, chat.stderr
    assert "bot> Lisbon is lovely in spring" in chat.stdout
    assert "bot> In Porto, Ribeira" in chat.stdout
    # the second turn saw the first as context: same code path as the webhook
    assert [m["role"] for m in model.requests()[1]["messages"]] == ["system", "user", "assistant", "user"]

    result = run("inspect", USER, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["message_count_since_summary"] == 2
    assert [p["user"] for p in report["recent_messages"]] == ["Where should I stay in Lisbon?", "And in Porto?"]
    assert report["summary"] == "" and report["last_interaction_timestamp"] > 0
    keys = {k["key"]: k for k in report["keys"]}
    assert f"chat_context:{{{USER}}}" in keys
    assert all(k["bytes"] > 0 and k["ttl_s"] > 0 for k in keys.values())

    text = run("inspect", USER)
    assert "valid pairs since summary: 2" in text.stdout


def test_inspect_rejects_a_bad_number(run) -> None:  # type: ignore[no-untyped-def]
    result = run("inspect", "12345")
    assert result.returncode == 2 and "E.164" in result.stderr


def test_each_command_needs_only_what_it_uses(redis_url: str, queue_redis_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    def bare(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, {"PATH": os.environ["PATH"], **env}, tmp_path)

    for command in (["users"], ["inspect", USER], ["facts", USER], ["reset", USER], ["export", USER]):
        result = bare(*command, **redis_env(redis_url, queue_redis_url))  # no Twilio token, no model key
        assert result.returncode == 0, (command, result.stderr)
        assert f"redis: {redis_url} (from environment)" in result.stderr
    extract = bare("extract", USER, **redis_env(redis_url, queue_redis_url))
    assert extract.returncode == 2 and "OPENAI_API_KEY: required unless OPENAI_BASE_URL" in extract.stderr
    chat = bare("chat")
    assert chat.returncode == 2 and "no bot is running here: start one with `make run`" in chat.stderr
    assert "Traceback" not in extract.stderr + chat.stderr


def test_settings_come_from_env_then_dotenv_then_make_run(queue_redis_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    redis_url = queue_redis_url  # a standalone Redis: the point is where the URL comes from
    (tmp_path / ".run").mkdir()
    (tmp_path / ".run" / "dev.env").write_text("REDIS_URL=redis://127.0.0.1:1/0\nPORT=5999\n")
    (tmp_path / ".env").write_text(f"REDIS_URL={redis_url}\n")
    result = run_cli(["users"], {"PATH": os.environ["PATH"]}, tmp_path)
    assert result.returncode == 0 and f"redis: {redis_url} (from .env)" in result.stderr
    (tmp_path / ".env").unlink()
    result = run_cli(["users"], {"PATH": os.environ["PATH"]}, tmp_path)
    assert result.returncode == 3 and "(from .run/dev.env)" in result.stderr
    assert "REDIS_URL=redis://127.0.0.1:1/0" in result.stderr


@pytest.mark.cluster
def test_export_lists_each_pair_once_and_writes_a_private_file(run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run("chat", "--user", USER, stdin="Where should I stay in Lisbon for a week?\nAnd what about Porto then?\n")
    out = tmp_path / "export.json"
    result = run("export", USER, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    exported = json.loads(out.read_text())
    assert [p["n"] for p in exported["conversation"]["pairs"]] == [1, 2]
    assert json.loads(run("export", USER).stdout)["user"] == USER


@pytest.mark.cluster
def test_chat_sends_real_media_through_the_twilio_standin(make_settings, redis_url, queue_redis_url, standin_server,  # type: ignore[no-untyped-def]
                                                         redis_client, model, tmp_path, services) -> None:
    """/voice and /photo upload a file to the local Twilio stand-in and post its Media URL,
    as `make run`'s chat does; the bot fetches it behind basic auth and answers."""
    from PIL import Image

    from bot import create_app
    from bot.dev.twilio_standin import TwilioStandin

    account = "AC" + "3" * 32
    twilio = TwilioStandin(account, AUTH_TOKEN).start()
    app = create_app(make_settings(TWILIO_ACCOUNT_SID=account, TWILIO_API_BASE_URL=twilio.url))
    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    photo = tmp_path / "dish.png"
    Image.new("RGB", (800, 600), (10, 120, 30)).save(photo)
    voice = os.path.join(os.path.dirname(__file__), "..", "data", "voice_ana.ogg")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, TWILIO_ACCOUNT_SID=account, TWILIO_API_BASE_URL=twilio.url,
               PORT=str(http.server_port), **redis_env(redis_url, queue_redis_url))
    try:
        result = run_cli(["chat", "--user", USER], env, tmp_path,
                         stdin=f"/voice {voice}\n/photo {photo} What is this dish?\n/photo /no/such/file.jpg\n"
                               "/location 41.1496 -8.6109 Café Majestic\n")
    finally:
        http.shutdown()
        twilio.stop()
    assert result.returncode == 0, result.stderr
    assert "Porto" in result.stdout  # what was heard, quoted back
    assert "800×600" not in result.stdout and "512×384 JPEG" in result.stdout, result.stdout  # downscaled, re-encoded
    assert "[not sent] /photo needs a file" in result.stdout
    users = [p.user for p in services.store.load(USER).recent]
    assert users[0].startswith("🎤 ") and users[1] == "[Photo] What is this dish?"
    assert users[2].startswith("📍 Shared location: Café Majestic")


def test_chat_waits_for_a_deferred_reply(make_settings, redis_url, queue_redis_url, standin_server,  # type: ignore[no-untyped-def]
                                         redis_client, model, tmp_path, services) -> None:
    """With deferred replies, a voice note's TwiML is empty and a worker answers through the
    Messages API: chat shows "typing…", then the reply, before the next message's."""
    from pathlib import Path

    from bot import create_app
    from bot.dev.processes import stop_process
    from bot.dev.twilio_standin import TwilioStandin

    account = "AC" + "4" * 32
    twilio = TwilioStandin(account, AUTH_TOKEN).start()
    settings = make_settings(TWILIO_ACCOUNT_SID=account, TWILIO_API_BASE_URL=twilio.url,
                             TWILIO_MESSAGING_BASE_URL=twilio.url, DEFERRED_REPLIES=True)
    app = create_app(settings)
    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    voice = os.path.join(os.path.dirname(__file__), "..", "data", "voice_ana.ogg")
    worker_env = {**os.environ, **{k: str(v) for k, v in settings.model_dump().items() if v is not None}}
    worker = subprocess.Popen([str(Path(sys.executable).parent / "rq"), "worker", "--worker-class",
                               "workers.worker.BotWorker", "--url", queue_redis_url, "--logging_level", "WARNING",
                               "replies"], env=worker_env, stderr=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, TWILIO_ACCOUNT_SID=account, TWILIO_API_BASE_URL=twilio.url,
               PORT=str(http.server_port), **redis_env(redis_url, queue_redis_url))
    try:
        result = run_cli(["chat", "--user", USER], env, tmp_path, stdin=f"/voice {voice}\nThanks, and on Sunday?\n")
    finally:
        stop_process(worker, timeout_s=15)
        http.shutdown()
        twilio.stop()
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("bot")]
    assert lines[0] == "bot> (typing…)" and lines[1].startswith("bot (by API)> 🎤 “") and "Porto" in lines[1], lines
    assert "canned reply" in lines[-1] and len(lines) in (3, 4)  # the text (deferred too if it came in first)


def test_chat_says_when_no_bot_answers(run) -> None:  # type: ignore[no-untyped-def]
    down = run("chat", "--url", "http://127.0.0.1:1/whatsapp", stdin="hi\n")
    assert down.returncode == 2 and "start one with `make run`" in down.stderr


@pytest.mark.cluster
def test_reset_users_and_job_status(run, model: StandinModel, services) -> None:  # type: ignore[no-untyped-def]
    run("chat", "--user", USER, stdin="Where should I stay in Lisbon for a week?\n")
    run("chat", "--user", "+447700900123", stdin="And what about Porto for a weekend?\n")
    listed = json.loads(run("users", "--json").stdout)
    assert {u["user"] for u in listed} == {USER, "+447700900123"}
    assert all(u["bytes"] > 0 and u["last_interaction"] for u in listed)

    report = json.loads(run("inspect", USER, "--json").stdout)
    assert report["summary_job"] == {"status": None, "triggered_at": None, "failed_job_ids": []}
    assert len(report["pending_pairs"]) == 1

    result = run("reset", USER)
    assert result.returncode == 0 and "conversation cleared" in result.stdout
    assert "nothing to clear" in run("reset", USER).stdout
    after = services.store.load(USER)
    assert after.recent == [] and after.count_since_summary == 0
    assert len(services.store.load("+447700900123").recent) == 1  # only the target


@pytest.mark.cluster
def test_inspect_shows_a_queued_summary_job(run, send, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        send(f"Question number {i} about a long trip through Portugal?")
    report = json.loads(run("inspect", USER, "--json").stdout)
    assert report["summary_job"]["status"] == "queued" and report["summary_job"]["triggered_at"]
    assert len(report["pending_pairs"]) == 10


def test_console_scripts_point_at_real_functions() -> None:
    """`whatsapp-bot` (pyproject's [project.scripts]) must keep resolving after moves."""
    import importlib
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    for target in scripts.values():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))


def test_chat_without_a_bot_says_how_to_start_one_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No `make run` here (no .run/dev.env, no token): one line saying what to do, quickly;
    chat loads only the settings, not the services."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    result = subprocess.run([sys.executable, "-m", "bot", "chat"], input="hi\n", capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == ("no bot is running here: start one with `make run` (in another terminal) "
                                     "and wait for its ready line")
    code = "import sys, bot.ops.cli, bot.ops.chat_command; print('bot.services' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root).stdout.strip() == "False"


# -- which Redis: the bot's, or none -----------------------------------------------------------
def seeded_run_dir(root: Path, user: str) -> None:
    """A checkout where `make run` ran and stopped: its Redis's data in .run/redis, with a user."""
    from bot.dev.embedded import start_redis_server

    server = start_redis_server((root / ".run" / "redis").resolve(), unix=True, persist=True)
    try:
        run_cli(["facts", user, "set", "city", "Braga"], {"PATH": os.environ["PATH"], "REDIS_URL": server.url}, root)
    finally:
        server.stop()  # SIGTERM: it saves


def test_with_make_run_stopped_the_cli_reads_the_bots_data_and_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    seeded_run_dir(tmp_path, USER)
    env = {"PATH": os.environ["PATH"], "EMBEDDING_MODEL": "off"}  # no REDIS_URL anywhere
    facts = run_cli(["facts", USER, "--json"], env, tmp_path)
    assert facts.returncode == 0, facts.stderr
    assert [(f["key"], f["value"]) for f in json.loads(facts.stdout)["user"]] == [("city", "Braga")]
    assert "make run is stopped: the development Redis on .run/redis, started for this command" in facts.stderr
    doc = tmp_path / "horario.md"
    doc.write_text("# Horário\n\nAbrimos de segunda a sábado, das 9h às 19h. Ao domingo estamos fechados.\n")
    assert run_cli(["kb", "add", str(doc), "--language", "pt"], env, tmp_path).returncode == 0  # a write is kept
    (tmp_path / ".run" / "dev.env").write_text("REDIS_URL=redis://127.0.0.1:1/0\n")  # a killed make run's
    listed = run_cli(["kb", "list"], env, tmp_path)
    assert listed.returncode == 0 and "horario" in listed.stdout, listed.stderr
    assert ".run/dev.env was left behind" in listed.stderr


def test_without_the_bots_redis_the_cli_refuses_and_says_how_to_start_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(["kb", "list"], {"PATH": os.environ["PATH"]}, tmp_path)  # no .run, no REDIS_URL
    assert result.returncode == 2 and result.stdout == ""
    assert "start the bot with `make run`" in result.stderr and "6379" not in result.stderr
