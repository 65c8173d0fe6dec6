"""`make run`: start the Procfile (web, worker, embed) with everything on, on loopback.

- Settings are checked first: a bad one is one line naming it, and exit code 2. An empty
  value (`NAME=`, as `.env.example` has them) is not set, in the environment and in `.env`.
- No REDIS_URL: an embedded real Redis whose data is kept in .run/redis across restarts
  (`make clean` starts afresh). A REDIS_URL that does not answer is named, exit code 2.
- No OPENAI_API_KEY and no OPENAI_BASE_URL: the offline stand-in model (bot/dev/standin.py).
- No TWILIO_AUTH_TOKEN: a development token and the local Twilio stand-in.
- The web binds 127.0.0.1, with development sizing (DEV_SIZING); the console is on with a
  development operator (bot/dev/dev_console.py).

What is in use is printed as one block, then a ready line once everything answers
(bot/dev/readiness.py). What the CLI needs to reach this bot is written to .run/dev.env.
Ctrl-C or SIGTERM, also under a pipe (`make run | tee log`), stops everything this started,
then one goodbye line and exit code 0; so does a SIGINT or SIGTERM sent to `make` alone (a
process manager's), or make's death (bot/dev/processes.py watch_parent).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from dotenv import dotenv_values

from bot.config import Settings, load_settings
from bot.dev.banner import describe, ready_lines
from bot.dev.twilio_answers import TEMPLATES
from bot.dev.dev_console import DevConsole, dev_console
from bot.dev.embedded import free_port, port_free, start_redis_server
from bot.dev.readiness import Expected, wait_ready
from bot.dev.processes import die_with_parent, ensure_tag, stop_process, stop_tagged, watch_parent
from bot.dev.terminal import Foreground
from bot.exceptions import ConfigError
from bot.observability.logs import mask_url
from bot.storage.connection import QUEUE_REQUIRED, probe

RUN_DIR = Path(".run")
DEV_ENV = RUN_DIR / "dev.env"
#: Written to .run/dev.env for the CLI: where this bot is; never the operator's secrets.
SHARED = ("REDIS_URL", "QUEUE_REDIS_URL", "REDIS_CLUSTER", "OPENAI_BASE_URL", "OPENAI_MODEL", "EXTRACTION_MODEL", "MODEL_STANDIN",
          "PUBLIC_BASE_URL", "PORT", "TWILIO_API_BASE_URL", "TWILIO_CONTENT_BASE_URL", "TWILIO_ACCOUNT_SID",
          "EMBEDDING_PORT", "EMBEDDING_MODEL", "EMBEDDING_BASE_URL", "EMBEDDING_GATE_BASE_URL", "KB_ALLOW_PRIVATE_URLS")
#: The Twilio stand-in's templates that stand for the business's own (bot/dev/twilio_answers.py).
STANDIN_TEMPLATES = {"TEMPLATE_REOPEN_SID": TEMPLATES[1]["sid"], "TEMPLATE_REMINDER_SID": TEMPLATES[2]["sid"]}
#: A placeholder while checking settings, for what this runner starts itself.
PENDING = "http://127.0.0.1:1/pending"
#: Development sizing, unless set: one web process, two workers (production's are the
#: Procfile's defaults, docs/scaling.md). MODEL_CONCURRENCY stays below the threads.
DEV_SIZING = {"HOST": "127.0.0.1", "WEB_CONCURRENCY": "1", "WEB_THREADS": "8", "WORKER_PROCESSES": "2",
              "MODEL_CONCURRENCY": "6"}


def say(text: str) -> None:
    """Print a line for the operator; a reader that went away (a closed pipe) is ignored."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (BrokenPipeError, OSError):
        pass


def _relay(source: IO[bytes], stopping: threading.Event) -> None:
    """Copy the Procfile's output to ours; keep draining it if our reader went away. Once
    stopping, what the processes say about being stopped (honcho's signals, gunicorn's
    farewells) is left out: the run ends with one goodbye line."""
    out: IO[bytes] | None = sys.stdout.buffer
    for line in iter(source.readline, b""):
        if out is None or stopping.is_set():
            continue
        try:
            out.write(line)
            out.flush()
        except (BrokenPipeError, OSError):
            out = None


def resolve_env() -> dict[str, str]:
    """Return the environment, with .env filling what it does not set; an empty value of
    either is not set."""
    env = {k: v for k, v in os.environ.items() if v != ""}
    from_file = dotenv_values(".env") if Path(".env").exists() else {}
    env.update({k: v for k, v in from_file.items() if v and k not in env})
    for name, value in DEV_SIZING.items():
        env.setdefault(name, value)
    return env


def check_settings(env: dict[str, str]) -> Settings:
    """Validate every setting before anything starts; what this runner provides is a placeholder."""
    values: dict[str, Any] = {k: v for k, v in env.items() if k in Settings.model_fields}
    if not env.get("OPENAI_API_KEY") and not env.get("OPENAI_BASE_URL"):
        values.update(OPENAI_BASE_URL=PENDING, MODEL_STANDIN="true")
    values.setdefault("TWILIO_AUTH_TOKEN", "placeholder")
    values.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")
    return load_settings(env_files=False, **values)


class Runner:
    """Everything `make run` started, in the order it must be stopped (last first)."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[bytes]] = []
        self.embedded: Any = None
        self.honcho: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.started = time.time() - 1  # RQ stamps a worker's birth in whole seconds

    def on_signal(self, _signum: int, _frame: object) -> None:
        """Ctrl-C or SIGTERM: stop, once."""
        self.stopping.set()

    def start(self, env: dict[str, str], settings: Settings) -> dict[str, str]:
        """Start Redis and the stand-in as needed; return the settings this runner chose."""
        chosen: dict[str, str] = {}
        if not env.get("REDIS_URL"):
            self.embedded = start_redis_server((RUN_DIR / "redis").resolve(), persist=True)
            chosen["REDIS_URL"] = self.embedded.url
        if not env.get("OPENAI_API_KEY") and not env.get("OPENAI_BASE_URL"):
            port = free_port()
            standin = subprocess.Popen(
                [sys.executable, "-m", "bot.dev.standin", "--port", str(port), "--reply-chars", "0"],  # just what reached it
                start_new_session=True, preexec_fn=die_with_parent,  # stopped last, by us
            )
            self.children.append(standin)
            chosen.update(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", MODEL_STANDIN="true")
            # its stand-in website (bot/dev/standin_site.py) is on loopback: `kb add` may read it
            if not env.get("KB_ALLOW_PRIVATE_URLS"):
                chosen["KB_ALLOW_PRIVATE_URLS"] = "true"
            if not env.get("TOOLS_OPENAPI"):
                chosen.update(self._start_clinic())
        if not env.get("EMBEDDING_PORT") and not port_free(settings.EMBEDDING_PORT):
            chosen["EMBEDDING_PORT"] = str(free_port())  # another run's `embed` has the default
        if not env.get("TWILIO_AUTH_TOKEN"):
            chosen["TWILIO_AUTH_TOKEN"] = "dev-" + secrets.token_hex(8)
            if not env.get("TWILIO_API_BASE_URL") and not env.get("TWILIO_ACCOUNT_SID"):
                chosen.update(self._start_twilio(chosen["TWILIO_AUTH_TOKEN"]))
                # its approved templates stand for the business's own (docs/window.md, docs/reminders.md)
                chosen.update({name: sid for name, sid in STANDIN_TEMPLATES.items() if not env.get(name)})
        return chosen

    def _start_clinic(self) -> dict[str, str]:
        """Start the example business API (a small clinic's appointments: bot/dev/clinic_api.py)
        for the stand-in model's tour of tools (docs/tools.md); return the settings that name
        its document. Waits until it answers: the web reads the document as it starts."""
        port = free_port()
        clinic = subprocess.Popen([sys.executable, "-m", "bot.dev.clinic_api", "--port", str(port)],
                                  start_new_session=True, preexec_fn=die_with_parent)
        self.children.append(clinic)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and port_free(port):  # not listening yet
            time.sleep(0.1)
        return {"TOOLS_OPENAPI": f"{url}/openapi.json"}

    def _start_twilio(self, token: str) -> dict[str, str]:
        """Start the local Twilio stand-in (media behind basic auth, the Messages API) for a
        development conversation; return the settings that point the bot at it."""
        port = free_port()
        account = "AC" + secrets.token_hex(16)
        standin = subprocess.Popen(
            [sys.executable, "-m", "bot.dev.twilio_standin", "--port", str(port), "--account-sid", account,
             "--auth-token", token],
            start_new_session=True, preexec_fn=die_with_parent,
        )
        self.children.append(standin)
        url = f"http://127.0.0.1:{port}"
        # Typing indicators of deferred replies go to the stand-in too: nothing leaves the machine.
        return {"TWILIO_API_BASE_URL": url, "TWILIO_MESSAGING_BASE_URL": url, "TWILIO_CONTENT_BASE_URL": url,
                "TWILIO_ACCOUNT_SID": account}

    def run_procfile(self, env: dict[str, str], settings: Settings) -> int:
        """Run the Procfile until it ends or we are told to stop; return its exit code."""
        self.honcho = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", "Procfile"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,  # our signal handling stops it, not the terminal's
            preexec_fn=die_with_parent,
        )
        assert self.honcho.stdout is not None
        relay = threading.Thread(target=_relay, args=(self.honcho.stdout, self.stopping), daemon=True)
        relay.start()
        threading.Thread(target=self._announce, args=(env, settings), daemon=True).start()
        while not self.stopping.is_set() and self.honcho.poll() is None:
            self.stopping.wait(0.2)
        return 0 if self.stopping.is_set() else (self.honcho.returncode or 0)

    def stop(self, tag: str) -> None:
        """Stop what was started: the Procfile (honcho stops web and worker), the stand-in,
        Redis; then anything of ours still running (tagged), whatever happened to honcho."""
        if self.honcho is not None and self.honcho.poll() is None:
            self.honcho.send_signal(signal.SIGTERM)
            try:
                self.honcho.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.honcho.pid, signal.SIGKILL)
        for child in reversed(self.children):
            stop_process(child)
        if self.embedded is not None:
            self.embedded.stop()  # SIGTERM: it saves its data first
        stop_tagged(tag)

    def _announce(self, env: dict[str, str], settings: Settings) -> None:
        """Print the ready line once everything answers, or what still does not."""
        expected = Expected(
            web=f"http://127.0.0.1:{env['PORT']}", queue_url=env.get("QUEUE_REDIS_URL") or env["REDIS_URL"],
            workers=int(env["WORKER_PROCESSES"]), console=bool(env.get("ADMIN_TOKEN")), since=self.started,
            embed=f"http://127.0.0.1:{env.get('EMBEDDING_PORT', settings.EMBEDDING_PORT)}"
            if settings.local_embed_process else None,
        )
        left = wait_ready(expected, self.stopping)
        if left == ["stopping"]:
            return
        for line in ready_lines(env, expected.console) if not left else [f"make run: still not answering: {', '.join(left)}"]:
            say(line)


def main() -> int:
    """Check settings, start dependencies as needed, then the Procfile; stop all on exit."""
    tag = ensure_tag()
    env = resolve_env()
    settings = checked(env)
    if settings is None:
        return 2
    RUN_DIR.mkdir(exist_ok=True)
    runner = Runner()
    code = 0
    with Foreground():  # Ctrl-C reaches this run, not make (which would report "Interrupt")
        for stop_signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: terminal closed
            signal.signal(stop_signal, runner.on_signal)
        # Ctrl-Z would stop us alone, out of make's sight: the run stops with Ctrl-C instead.
        signal.signal(signal.SIGTSTP, signal.SIG_IGN)
        # make told to stop by a signal of its own, or gone: stop everything too (not only
        # a terminal's Ctrl-C, which reaches us anyway).
        die_with_parent()
        watch_parent(lambda: runner.on_signal(signal.SIGTERM, None), runner.stopping)
        try:
            chosen = runner.start(env, settings)
            env.update(chosen)
            console = prepare(env, chosen)
            for line in describe(settings, env, chosen, console):
                say(line)
            if not runner.stopping.is_set():
                code = runner.run_procfile(env, settings)
                if code:
                    say(f"make run: a process of the Procfile exited (code {code}); stopping")
        finally:
            runner.stop(tag)
            DEV_ENV.unlink(missing_ok=True)
    say("make run: stopped web, worker, embed" + (", stand-in" if runner.children else "")
        + (" and Redis (data kept in .run/redis)" if runner.embedded else "") + ". Bye.")
    return code


def checked(env: dict[str, str]) -> Settings | None:
    """Return the settings, or None after one line saying what is wrong."""
    if env.get("APP_ENV") == "production" and not env.get("REDIS_URL"):
        say("make run: REDIS_URL is required with APP_ENV=production")
        return None
    try:
        settings = check_settings(env)
    except ConfigError as err:
        say(f"make run: {err}")
        return None
    env.setdefault("PORT", "5000")
    port = int(env["PORT"]) if env["PORT"].isdigit() else 0
    if not 0 < port < 65536:
        say(f"make run: PORT={env['PORT']!r} is not a port number")
        return None
    if not port_free(port, host=env["HOST"]):
        say(f"make run: PORT {port} is in use (another `make run`?); stop it or set PORT")
        return None
    for name in ("REDIS_URL", "QUEUE_REDIS_URL"):
        found = probe(env[name]) if env.get(name) else None
        if found is not None and found.error is not None:
            say(f"make run: {name}={mask_url(env[name])} does not answer ({found.error}); "
                "start that Redis, or unset it" + (" for an embedded one" if name == "REDIS_URL" else ""))
            return None
        if name == "REDIS_URL" and found is not None and found.cluster and not env.get("QUEUE_REDIS_URL"):
            say(f"make run: {QUEUE_REQUIRED}")
            return None
    return settings


def prepare(env: dict[str, str], chosen: dict[str, str]) -> DevConsole | None:
    """Set up what the Procfile's processes share: metrics, PATH, the console, .run/dev.env."""
    if not env.get("PROMETHEUS_MULTIPROC_DIR"):
        # /metrics must add up the gunicorn workers and the RQ worker's job processes.
        metrics_dir = RUN_DIR / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir.resolve())
    # The Procfile names gunicorn and rq: use the ones installed next to this Python.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    console = None
    try:
        console = dev_console(env, RUN_DIR)
    except Exception as err:  # the console is a convenience: the bot runs without it
        say(f"make run: the development console is off ({type(err).__name__}: {err})")
    if console is not None:
        env.update(console.settings)
    shared = {k: env[k] for k in SHARED if env.get(k)}
    if "TWILIO_AUTH_TOKEN" in chosen:  # a throwaway token: `whatsapp-bot chat` signs with it
        shared["TWILIO_AUTH_TOKEN"] = chosen["TWILIO_AUTH_TOKEN"]
    DEV_ENV.write_text("".join(f"{k}={v}\n" for k, v in shared.items()))
    DEV_ENV.chmod(0o600)
    return console


if __name__ == "__main__":
    raise SystemExit(main())
