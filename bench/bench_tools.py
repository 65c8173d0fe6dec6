"""What a read tool adds to a reply (docs/tools.md): the same questions answered with the
business's tools on (the model asks for free slots, the bot calls the example clinic API,
the model answers from it) and off, through the app's webhook (Flask, signed requests, a real
Redis, the real openai client to the stand-in model answering at once, the clinic over HTTP).

Prints figures; asserts nothing. Everything runs on 127.0.0.1 and is bounded by --messages.

    .venv/bin/python bench/bench_tools.py [--messages 200]

Figures: the reply's time with and without the tool (p50/p99), the API's own time (its
handler, measured inside the clinic), and what is left: the bot's extra time for a read tool
(the call's HTTP, the second model round's HTTP, fencing the answer, the log); Redis commands
per message with tools on and off.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import pct  # noqa: E402
from bot.dev.clinic_api import ClinicApi, serve  # noqa: E402
from bot.dev.embedded import free_port, start_embedded_redis  # noqa: E402
from bot.dev.standin import StandinModel  # noqa: E402

TOKEN = "bench-auth-token-0123456789"
TODAY = date(2030, 1, 7)


class TimedClinic(ClinicApi):
    """The clinic, timing its own handling of each free-slots question."""

    def __init__(self) -> None:
        super().__init__(TODAY)
        self.spent: list[float] = []

    def free_slots(self, day_text: str | None, service: str | None) -> Any:
        started = time.perf_counter()
        try:
            return super().free_slots(day_text, service)
        finally:
            self.spent.append(time.perf_counter() - started)


def run(messages: int, tools: bool, redis_url: str, model: StandinModel, clinic_url: str,
        first: int = 0) -> tuple[list[float], int]:
    """Post `messages` questions from as many users; return each reply's seconds and the
    Redis commands they made."""
    from twilio.request_validator import RequestValidator

    from bot import create_app
    from bot.config import load_settings

    values: dict[str, Any] = {"TWILIO_AUTH_TOKEN": TOKEN, "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": model.url,
                              "REDIS_URL": redis_url, "EMBEDDING_MODEL": "off", "LOG_LEVEL": "WARNING",
                              "EXTRACTION_INTERVAL": 0, "RATE_LIMIT_PER_MINUTE": 0}
    if tools:
        values.update(TOOLS_OPENAPI=f"{clinic_url}/openapi.json", TOOLS_BASE_URL=clinic_url)
    client = create_app(load_settings(env_files=False, **values)).test_client()
    validator = RequestValidator(TOKEN)
    store = redis.Redis.from_url(redis_url)
    before = int(store.info("stats")["total_commands_processed"])
    seconds = []
    for n in range(first, first + messages):
        day = TODAY + timedelta(days=1 + n % 5)
        form = {"From": f"whatsapp:+3519{'1' if tools else '2'}{n:07d}", "To": "whatsapp:+14155238886",
                "Body": f"Há vaga no dia {day.isoformat()}?", "MessageSid": f"SM{'a' if tools else 'b'}{n:031d}",
                "AccountSid": "AC" + "0" * 32, "NumMedia": "0"}
        signature = validator.compute_signature("http://localhost/whatsapp", form)
        started = time.perf_counter()
        response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": signature})
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
    commands = int(store.info("stats")["total_commands_processed"]) - before - 2  # the two INFO calls
    store.close()
    return seconds, commands


def main() -> int:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("APP_ENV", "development")
    folder = tempfile.TemporaryDirectory(prefix="bench-tools-")
    embedded = start_embedded_redis(Path(folder.name) / "redis.db", tcp=True)
    model = StandinModel(port=free_port(), latency_s=0.0, record="usage").start()
    api = TimedClinic()
    port = free_port()
    server = serve("127.0.0.1", port, clinic=api)
    try:
        url = f"http://127.0.0.1:{port}"
        run(20, True, embedded.url, model, url, first=10**6)  # warm up both paths (imports, connections)
        run(20, False, embedded.url, model, url, first=10**6)
        api.spent.clear()
        with_tools, commands_on = run(args.messages, True, embedded.url, model, url)
        without, commands_off = run(args.messages, False, embedded.url, model, url)
    finally:
        server.shutdown()
        server.server_close()
        model.stop()
        embedded.stop()
        folder.cleanup()
    ms = lambda values, q: pct([v * 1000 for v in values], q)  # noqa: E731
    extra = [w - o - a for w, o, a in zip(with_tools, sorted(without), sorted(api.spent))]
    print(f"# bench_tools: {args.messages} questions about free slots, the model answering at once")
    print(f"reply with the tool     p50 {ms(with_tools, 50):.1f} / p99 {ms(with_tools, 99):.1f} ms")
    print(f"reply without tools     p50 {ms(without, 50):.1f} / p99 {ms(without, 99):.1f} ms")
    print(f"the API's own time      p50 {ms(api.spent, 50):.2f} / p99 {ms(api.spent, 99):.2f} ms (its handler)")
    print(f"the bot's extra time for a read tool: p50 {ms(with_tools, 50) - ms(without, 50) - ms(api.spent, 50):.1f} ms "
          f"(difference of the medians, the API's own time taken out; per message p50 {ms(extra, 50):.1f} / "
          f"p99 {ms(extra, 99):.1f} ms, target p50 <= 20 ms)")
    print(f"Redis commands per message: {commands_on / args.messages:.1f} with tools, "
          f"{commands_off / args.messages:.1f} without (as Redis counts them: INFO total_commands_processed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
