"""Measure voice notes and photos (docs/media.md): added latency, prompt tokens, Redis bytes.

Prints figures; asserts nothing. Everything runs on 127.0.0.1 and every loop is bounded: a
private embedded Redis, gunicorn (1 worker, 4 gthread threads) running the real app over
HTTP, and in this process the stand-in model (faster-whisper tiny.en transcribes
tests/data/voice_ana.ogg, 3.9 s of speech, for real) and the Twilio stand-in (Media URLs
behind basic auth and a cross-origin redirect, and the Messages API). Each message comes
from a new user, so every prompt has the same size; RATE_LIMIT_PER_MINUTE=0 and
EXTRACTION_INTERVAL=0 keep the rate limit and background jobs out of the figures.

1. Latency: --messages voice notes and as many typed messages with the same words, taken in
   turns, in REPLY_MODE=twiml (the webhook request, client side), REPLY_MODE=rest (from the
   POST to the Messages API stand-in receiving the reply; the stand-in stamps the arrival,
   since TwilioStandin.wait_for polls every 20 ms), and with deferred replies (docs/deferred.md:
   the voice note's reply made by an RQ worker and sent through the Messages API), and what
   deferring adds to a voice note's reply over TwiML. The download and the transcription are
   read from the app's log (media.fetched, transcription.completed) and the transcription's
   mean from the bot_transcription_seconds histogram on /metrics.
2. Tokens: the reply call's prompt tokens with a photo and its caption against the caption
   typed alone, at IMAGE_DETAIL=low and high (MAX_PROMPT_TOKENS 800, and 2000 for high): what
   the stand-in reported, and our own BuiltPrompt count (the prompt.built log line).
3. Storage: --pairs voice notes from one user and the same words typed --pairs times by
   another; Redis MEMORY USAGE of their chat_context (and chat_pending, where the pairs that
   left the recent window wait for the summary) per pair, and one stored pair's JSON.

    .venv/bin/python bench/bench_media.py                  # the defaults: about a minute on 2 cores
    .venv/bin/python bench/bench_media.py --messages 50 --pairs 20

Everything it starts (Redis, gunicorn, the stand-ins) is stopped at the end, on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import itertools
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from http.client import HTTPConnection
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlencode
from urllib.request import urlopen
from xml.etree import ElementTree

import redis
from PIL import Image
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import pct  # noqa: E402
from bot.dev.embedded import free_port, start_embedded_redis  # noqa: E402
from bot.dev.processes import stop_process  # noqa: E402
from bot.dev.standin import StandinModel  # noqa: E402
from bot.dev.twilio_standin import TwilioStandin  # noqa: E402
from bot.observability.logs import configure_logging  # noqa: E402
from bot.storage.keys import CONTEXT_PREFIX, PENDING_PREFIX, USAGE_PREFIX, user_key  # noqa: E402
from bot.storage.records import decode_pairs  # noqa: E402

TOKEN = "bench-auth-token"
ACCOUNT = "AC" + "b" * 32
VOICE = (ROOT / "tests" / "data" / "voice_ana.ogg").read_bytes()
OGG = "audio/ogg; codecs=opus"
#: What tiny.en hears in voice_ana.ogg, typed.
SENTENCE = "Hello there. My name is Anna and I live in Porto."
CAPTION = "What is this dish, and is it vegetarian?"
#: WhatsApp sends photos at about 1600 px on the long side.
PHOTO_SIZE = (1600, 1200)
#: Reply length as in bench_webhook.py and bench_redis_budget.py.
REPLY_CHARS = 400
#: (IMAGE_DETAIL, MAX_PROMPT_TOKENS) of part 2.
TOKEN_CASES = (("low", 800), ("high", 800), ("high", 2000))


class TimedTwilio(TwilioStandin):
    """The Twilio stand-in, stamping when each reply reaches its Messages API (by recipient)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrived: dict[str, float] = {}

    def _create(self, account: str, auth: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        stamp = time.perf_counter()
        answer = super()._create(account, auth, form)
        with self.lock:
            self.arrived.setdefault(form.get("To", ""), stamp)
        return answer


class Web:
    """gunicorn running the app with these settings; its JSON log is kept in a temporary file."""

    def __init__(self, base_env: dict[str, str], **overrides: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/whatsapp"
        self.env = {**base_env, **overrides}
        self.log = Path(tempfile.mkstemp(prefix="bench-media-web-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "Web":
        cmd = ["gunicorn", "--worker-class", "gthread", "--workers", "1", "--threads", "4",
               "--bind", f"127.0.0.1:{self.port}", "--log-level", "warning", "bot:create_app()"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=out, stderr=out)
        deadline = time.time() + 30
        try:
            while time.time() < deadline:
                try:
                    with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1):
                        return self
                except OSError:
                    time.sleep(0.2)
        except BaseException:  # Ctrl-C while it starts: `with` would not stop it
            self.__exit__()
            raise
        log = self.log.read_text(errors="replace")[-2000:]
        self.__exit__()
        raise SystemExit(f"gunicorn did not start; its log:\n{log}")

    def __exit__(self, *_: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.log.unlink(missing_ok=True)

    def events(self, name: str) -> list[dict[str, Any]]:
        """Return the app's JSON log events with this name, oldest first."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                out.append(event)
        return out

    def transcription_histogram(self) -> tuple[float, float]:
        """Return (sum of seconds, count) of bot_transcription_seconds from /metrics."""
        with urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            body = response.read().decode()
        found = dict(re.findall(r"^bot_transcription_seconds_(sum|count) (\S+)$", body, re.MULTILINE))
        return float(found.get("sum", 0)), float(found.get("count", 0))

    def post(self, form: dict[str, str]) -> tuple[float, int, str]:
        """Post a signed webhook; return (seconds, status, the TwiML reply's text)."""
        headers = {"X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(self.url, form),
                   "Content-Type": "application/x-www-form-urlencoded"}
        conn = HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            started = time.perf_counter()
            conn.request("POST", "/whatsapp", body=urlencode(form), headers=headers)
            response = conn.getresponse()
            body = response.read()
            elapsed = time.perf_counter() - started
        finally:
            conn.close()
        texts = [m.text or "" for m in ElementTree.fromstring(body).iter("Message")] if response.status == 200 else []
        return elapsed, response.status, "\n".join(texts)


def inbound(twilio: TwilioStandin, user: str, kind: str, body: str = "", media: bytes = b"") -> dict[str, str]:
    """Return Twilio's form for a typed message, a voice note or a photo (media served by the stand-in)."""
    sid = ("MM" if kind != "text" else "SM") + uuid.uuid4().hex
    form = {"From": f"whatsapp:{user}", "To": "whatsapp:+14155238886", "Body": body, "MessageSid": sid,
            "AccountSid": ACCOUNT, "NumMedia": "0", "WaId": user[1:]}
    if kind != "text":
        content_type = OGG if kind == "voice" else "image/jpeg"
        form.update(NumMedia="1", MediaContentType0=content_type,
                    MediaUrl0=twilio.add_media(sid, media, content_type))
    return form


def message(twilio: TwilioStandin, user: str, kind: str) -> dict[str, str]:
    """Return the voice note's form, or the form of the same words typed."""
    return inbound(twilio, user, "voice", media=VOICE) if kind == "voice" else inbound(twilio, user, "text", SENTENCE)


# -- part 1: latency ---------------------------------------------------------------------------


@contextlib.contextmanager
def deferred_worker(env: dict[str, str]) -> Iterator[None]:
    """An RQ worker answering deferred replies (the Procfile's, on the `replies` queue only)."""
    cmd = ["rq", "worker", "--worker-class", "workers.worker.BotWorker", "--url", env["REDIS_URL"],
           "--logging_level", "WARNING", "replies"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        stop_process(proc, timeout_s=15)


def latency(base_env: dict[str, str], twilio: TimedTwilio, users: Iterator[str], mode: str, n: int) -> dict[str, Any]:
    """Time n voice notes and n typed messages, in turns, in one reply mode ("deferred": TwiML,
    voice notes answered by a worker through the Messages API, docs/deferred.md)."""
    times: dict[str, list[float]] = {"voice": [], "text": []}
    hook_ms: list[float] = []
    unanswered = 0
    deferred = mode == "deferred"
    env = {**base_env, "DEFERRED_REPLIES": "true" if deferred else "false", "TWILIO_MESSAGING_BASE_URL": twilio.url}
    with Web(env, REPLY_MODE="rest" if mode == "rest" else "twiml") as web, \
            (deferred_worker({**env, "LOG_JSON": "false", "LOG_LEVEL": "WARNING"}) if deferred else contextlib.nullcontext()):
        for i in range(2 + n):  # the first two of each warm up the app, the model and connections
            if i == 2:
                before = web.transcription_histogram()
            for kind in (("voice", "text") if i % 2 else ("text", "voice")):
                user = next(users)
                form = message(twilio, user, kind)
                sent = len(twilio.messages())
                started = time.perf_counter()
                elapsed, status, reply = web.post(form)
                if mode == "rest" or (deferred and kind == "voice"):
                    hook_s = elapsed
                    got = twilio.wait_for(sent + 1, timeout_s=20)
                    reply = got[-1]["Body"] if len(got) > sent else ""
                    with twilio.lock:
                        arrived = twilio.arrived.get(f"whatsapp:{user}")
                    elapsed = arrived - started if arrived is not None else float("nan")
                if i < 2:
                    continue
                if status == 200 and "canned reply" in reply and (kind == "text" or reply.startswith("🎤")):
                    times[kind].append(elapsed * 1000)
                    if mode == "rest" or (deferred and kind == "voice"):
                        hook_ms.append(hook_s * 1000)
                else:
                    unanswered += 1
        after = web.transcription_histogram()
        fetched = [float(e["duration_ms"]) for e in web.events("media.fetched")][-n:]
        heard = [float(e["duration_ms"]) for e in web.events("transcription.completed")][-n:]
    count = after[1] - before[1]
    return {"mode": mode, "times": times, "fetch_ms": fetched, "transcribe_ms": heard, "unanswered": unanswered,
            "hist_mean_ms": (after[0] - before[0]) / count * 1000 if count else float("nan"), "hist_n": count,
            "hook_ms": hook_ms}


def print_latency(result: dict[str, Any]) -> None:
    """Print one mode's figures."""
    voice, text = result["times"]["voice"], result["times"]["text"]
    what = {"twiml": "webhook request, client side", "rest": "POST to the reply at the Messages API",
            "deferred": "typed: the webhook request; voice: POST to the reply at the Messages API, from a worker"}[
        result["mode"]]
    label = "DEFERRED_REPLIES=true" if result["mode"] == "deferred" else f"REPLY_MODE={result['mode']}"
    print(f"   {label} ({what}), {len(voice)} voice notes and {len(text)} typed, "
          f"{result['unanswered']} not answered")
    print(f"     typed        p50 {pct(text, 50):7.1f} ms  p99 {pct(text, 99):7.1f} ms")
    print(f"     voice note   p50 {pct(voice, 50):7.1f} ms  p99 {pct(voice, 99):7.1f} ms")
    added = {q: pct(voice, q) - pct(text, q) for q in (50, 99)}
    print(f"     added        p50 {added[50]:7.1f} ms  p99 {added[99]:7.1f} ms  (voice percentile - typed percentile)")
    fetch, heard = result["fetch_ms"], result["transcribe_ms"]
    if result["mode"] == "deferred":
        fetch = heard = []  # done in the worker, whose log is not read here
        print("     download and transcription: in the worker (as above, plus the job's pickup)")
        hooks = result["hook_ms"]
        print(f"     the webhook's own answer (empty TwiML), voice: p50 {pct(hooks, 50):.1f} ms  p99 {pct(hooks, 99):.1f} ms")
        return
    print(f"     download     p50 {pct(fetch, 50):7.1f} ms  p99 {pct(fetch, 99):7.1f} ms  "
          f"(media.fetched: API 307 + CDN, {len(VOICE):,} B)")
    print(f"     transcription p50 {pct(heard, 50):6.1f} ms  p99 {pct(heard, 99):7.1f} ms  "
          f"(transcription.completed); bot_transcription_seconds mean {result['hist_mean_ms']:.1f} ms "
          f"over {result['hist_n']:.0f}")
    if result["mode"] == "rest":
        hooks = result["hook_ms"]
        print(f"     the webhook's own answer (empty TwiML), either kind: p50 {pct(hooks, 50):.1f} ms  "
              f"p99 {pct(hooks, 99):.1f} ms")


# -- part 2: tokens ----------------------------------------------------------------------------


def photo() -> bytes:
    """Return the same photo-like JPEG every run: smooth colour fields under a fine grain."""
    rng = random.Random(19)
    fields = Image.frombytes("RGB", (40, 30), rng.randbytes(40 * 30 * 3)).resize(PHOTO_SIZE, Image.Resampling.BICUBIC)
    grain = Image.frombytes("L", (400, 300), rng.randbytes(400 * 300)).resize(PHOTO_SIZE).convert("RGB")
    out = io.BytesIO()
    Image.blend(fields, grain, 0.15).save(out, format="JPEG", quality=82)
    return out.getvalue()


def sent_image(request: dict[str, Any]) -> str:
    """Describe the image part of a reply request: pixels, format, detail and data URL size."""
    for part in request["messages"][-1]["content"]:
        if part.get("type") == "image_url":
            url = part["image_url"]["url"]
            image = Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2])))
            detail = part["image_url"].get("detail")
            return f"{image.width}x{image.height} {image.format}, detail {detail}, data URL {len(url):,} B"
    return "no image part"


def tokens(base_env: dict[str, str], twilio: TwilioStandin, model: StandinModel, users: Iterator[str]) -> None:
    """Print prompt tokens of a photo with its caption against the caption typed alone."""
    data = photo()
    print(f"2. Reply prompt tokens, a new user (no history, no facts): a {PHOTO_SIZE[0]}x{PHOTO_SIZE[1]} JPEG "
          f"of {len(data):,} B with the caption {CAPTION!r}, against the caption typed alone")
    for detail, budget in TOKEN_CASES:
        with Web(base_env, LOG_LEVEL="DEBUG", IMAGE_DETAIL=detail, MAX_PROMPT_TOKENS=str(budget)) as web:
            figures: dict[str, tuple[int, int]] = {}
            for kind in ("text", "photo"):
                model.reset()
                web.post(inbound(twilio, next(users), kind, CAPTION, data))
                [reply] = [b for b in model.requests() if not b.get("response_format")]  # the reply call only
                figures[kind] = (model.reported()[-1]["prompt_tokens"], web.events("prompt.built")[-1]["tokens"])
            image = sent_image(reply)
            photo_log = web.events("media.photo")[-1]
        (text_st, text_ours), (photo_st, photo_ours) = figures["text"], figures["photo"]
        print(f"   IMAGE_DETAIL={detail:<4} MAX_PROMPT_TOKENS={budget}: stand-in {text_st} -> {photo_st} "
              f"(+{photo_st - text_st}); BuiltPrompt {text_ours} -> {photo_ours} (+{photo_ours - text_ours}); "
              f"image_tokens {photo_log.get('image_tokens')}")
        print(f"     sent: {image}")


# -- part 3: storage ---------------------------------------------------------------------------


def storage(base_env: dict[str, str], twilio: TwilioStandin, redis_url: str, users: Iterator[str], pairs: int) -> None:
    """Print Redis bytes per stored voice-note pair against a typed pair with the same words."""
    r = redis.Redis.from_url(redis_url)
    print(f"3. Redis bytes after {pairs} pairs from one user, voice notes against the same words typed "
          "(MEMORY USAGE, every field counted)")
    with Web(base_env) as web:
        who = {"voice": next(users), "text": next(users)}
        for _ in range(pairs):
            for kind, user in who.items():
                web.post(message(twilio, user, kind))
    for kind, user in who.items():
        context = r.memory_usage(user_key(CONTEXT_PREFIX, user), samples=0) or 0
        pending = r.memory_usage(user_key(PENDING_PREFIX, user), samples=0) or 0
        usage = r.memory_usage(user_key(USAGE_PREFIX, user), samples=0) or 0
        recent = decode_pairs(r.hget(user_key(CONTEXT_PREFIX, user), "recent_messages"))
        one = recent[-1].to_json().encode() if recent else b""
        stored = r.llen(user_key(PENDING_PREFIX, user)) + len(recent)
        print(f"   {'voice note' if kind == 'voice' else 'typed':<10}: chat_context {context:,} B "
              f"({len(recent)} recent pairs) + chat_pending {pending:,} B = "
              f"{(context + pending) / max(stored, 1):,.0f} B per pair over {stored} pairs; "
              f"one pair's JSON {len(one)} B; user_usage {usage:,} B")
        print(f"     stored user side: {recent[-1].user if recent else None!r}")


# -- the run -----------------------------------------------------------------------------------


def machine() -> str:
    """Return one line about this machine: cores as nproc counts them, CPU, system, Python."""
    info = Path("/proc/cpuinfo")
    cpus = [line.split(":", 1)[1].strip() for line in (info.read_text() if info.exists() else "").splitlines()
            if line.startswith("model name")]
    return (f"{len(os.sched_getaffinity(0))} cores (nproc), {cpus[0] if cpus else platform.processor() or '?'}, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}")


def main() -> int:
    """Run the three parts and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20,
                        help="voice notes, and as many typed messages, timed per reply mode (default 20)")
    parser.add_argument("--pairs", type=int, default=10, help="pairs stored per user in part 3 (default 10)")
    args = parser.parse_args()
    if not 1 <= args.messages <= 1000 or not 1 <= args.pairs <= 1000:
        raise SystemExit("keep the benchmark bounded: --messages and --pairs between 1 and 1,000")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks on a kill too
    configure_logging("WARNING")  # the stand-ins in this process log at DEBUG otherwise

    # The figures depend on the core: this says how fast this one is, for comparing runs.
    calibration = min(timeit.repeat("sum(range(10**6))", number=5, repeat=5)) / 5 * 1000
    print(f"0. This core: sum(range(10**6)) takes {calibration:.1f} ms (as python -m timeit measures it)")
    print(f"   machine: {machine()}")
    tmp = tempfile.TemporaryDirectory(prefix="bench-media-")
    embedded = model = twilio = None
    try:
        embedded = start_embedded_redis(Path(tmp.name) / "bench.db", tcp=True)
        model = StandinModel(reply_chars=REPLY_CHARS).start()
        twilio = TimedTwilio(ACCOUNT, TOKEN).start()
        base_env = {
            **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            "APP_ENV": "development", "LOG_LEVEL": "INFO", "LOG_JSON": "true",
            "TWILIO_AUTH_TOKEN": TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT, "TWILIO_API_BASE_URL": twilio.url,
            "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": model.url, "REDIS_URL": embedded.url,
            "RATE_LIMIT_PER_MINUTE": "0", "EXTRACTION_INTERVAL": "0",
            "DEFERRED_REPLIES": "false",  # part 1 times both ways; parts 2 and 3 read the web's own calls
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        users = (f"+1555{i:07d}" for i in itertools.count(1))  # a new WhatsApp user per message
        print(f"1. Latency a voice note adds over the same words typed ({len(VOICE):,} B Ogg Opus, 3.9 s; "
              f"{SENTENCE!r}), model stand-in answers at once, reply {REPLY_CHARS} chars")
        results = {mode: latency(base_env, twilio, users, mode, args.messages) for mode in ("twiml", "rest", "deferred")}
        for result in results.values():
            print_latency(result)
        sync, later = results["twiml"]["times"]["voice"], results["deferred"]["times"]["voice"]
        print(f"   a deferred voice note's reply over the same note answered in TwiML: "
              f"p50 {pct(later, 50) - pct(sync, 50):+.1f} ms  p99 {pct(later, 99) - pct(sync, 99):+.1f} ms")
        tokens(base_env, twilio, model, users)
        storage(base_env, twilio, embedded.url, users, args.pairs)
    except KeyboardInterrupt:
        print("interrupted: stopping what the benchmark started", file=sys.stderr)
        return 130
    finally:
        for service in (twilio, model, embedded):
            if service is not None:
                service.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
