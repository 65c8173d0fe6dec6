"""Benchmark the real stack: gunicorn + real Redis + the stand-in model over HTTP.

Prints figures; asserts nothing. Everything runs on 127.0.0.1 and every loop is bounded.

    .venv/bin/python bench/bench_webhook.py                 # the defaults quoted in notes
    .venv/bin/python bench/bench_webhook.py --users 10 --turns 5 --long-users 2 --long-turns 40

Phases, for the compact strategy and the full-history baseline:
  A  overhead: --users concurrent users x --turns turns, model latency --latency-ms.
     Server overhead = Server-Timing app - model (our time, excluding the model's wait).
  R  round trips: a small run under MONITOR; top-level Redis commands per message, script
     internals excluded, a MULTI..EXEC block counted once.
  B  long conversations: --long-users x --long-turns, with an RQ worker summarizing
     (compact only). Prompt tokens by turn, Redis bytes per user (at rest: without the
     redelivery records, which expire 15 minutes after the last message), summary lag, model
     tokens per message amortised (replies + summaries).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from http.client import HTTPConnection, RemoteDisconnected
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import redis
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import pct  # noqa: E402
from bot.dev.embedded import free_port, start_embedded_redis  # noqa: E402

TOKEN = "bench-auth-token"
#: Seconds of quiet after which a user's pending pairs are folded into the summary (at rest).
IDLE_S = 3
WORDS = (
    "trip lisbon hotel quiet cheap museum tram dinner budget flight weekend family beach "
    "walk old town view restaurant vegetarian booking sunday train porto wine tour"
).split()


def message(rng: random.Random, user_index: int, turn: int) -> str:
    """Return a WhatsApp-sized user message (20-200 chars) that names its turn."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
    return f"u{user_index} turn {turn}: {words}?"


class Stack:
    """gunicorn (+ optional RQ worker) for one strategy, on shared Redis and stand-in."""

    def __init__(self, args: argparse.Namespace, redis_url: str, model_url: str, strategy: str) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "APP_ENV": "development",
            "TWILIO_AUTH_TOKEN": TOKEN,
            "OPENAI_API_KEY": "bench",
            "OPENAI_BASE_URL": model_url,
            "REDIS_URL": redis_url,
            "LOG_LEVEL": "WARNING",
            # Users "at rest" in phase B: quiet this long, their pending pairs are folded in.
            "SUMMARY_IDLE_S": str(IDLE_S),
            "LOG_JSON": "true",
            "CONTEXT_STRATEGY": strategy,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.args = args
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_log: Path | None = None
        self.web_log: Path | None = None

    def web_events(self, name: str) -> list[dict[str, Any]]:
        """Return the web's JSON log events with this name."""
        return _events(self.web_log, name)

    def start_web(self) -> None:
        """Start gunicorn and wait until /healthz answers."""
        cmd = [
            "gunicorn", "--worker-class", "gthread", "--workers", str(self.args.web_workers),
            "--threads", str(self.args.threads), "--bind", f"127.0.0.1:{self.port}",
            "--log-level", "warning", "bot:create_app()",
        ]
        self.web_log = Path(tempfile.mkstemp(prefix="bench-web-", suffix=".log")[1])
        log = self.web_log.open("wb")
        self.procs.append(subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=log, stderr=log))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("gunicorn did not start")

    def start_worker(self) -> None:
        """Start an RQ worker whose JSON logs we read for summary lag."""
        env = {**self.env, "LOG_LEVEL": "INFO"}
        self.worker_log = Path(tempfile.mkstemp(prefix="bench-worker-", suffix=".log")[1])
        log = self.worker_log.open("wb")
        cmd = ["rq", "worker", "--worker-class", "workers.worker.BotWorker", "--url", self.env["REDIS_URL"], "--with-scheduler",
               "--logging_level", "WARNING", "summaries", "facts"]
        self.procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=log))
        r = redis.Redis.from_url(self.env["REDIS_URL"])
        deadline = time.time() + 30
        while time.time() < deadline and not r.smembers("rq:workers"):
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every process."""
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


class Client:
    """One simulated WhatsApp user posting signed webhooks over a keep-alive connection."""

    def __init__(self, port: int, user: str) -> None:
        self.conn = HTTPConnection("127.0.0.1", port, timeout=30)
        self.url = f"http://127.0.0.1:{port}/whatsapp"
        self.user = user
        self.validator = RequestValidator(TOKEN)

    def send(self, body: str) -> tuple[float, float, float]:
        """Post one message; return (client seconds, app ms, model ms)."""
        form = {
            "From": f"whatsapp:{self.user}", "To": "whatsapp:+14155238886", "Body": body,
            "MessageSid": "SM" + uuid.uuid4().hex, "NumMedia": "0", "WaId": self.user[1:],
        }
        headers = {
            "X-Twilio-Signature": self.validator.compute_signature(self.url, form),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        started = time.perf_counter()
        try:
            self.conn.request("POST", "/whatsapp", body=urlencode(form), headers=headers)
            response = self.conn.getresponse()
        except (ConnectionError, RemoteDisconnected):
            # gunicorn closes keep-alive connections idle for 2 s; Twilio would just reconnect.
            self.conn.close()
            started = time.perf_counter()
            self.conn.request("POST", "/whatsapp", body=urlencode(form), headers=headers)
            response = self.conn.getresponse()
        response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")
        timing = dict(
            part.strip().split(";dur=") for part in response.getheader("Server-Timing", "").split(",") if part
        )
        return elapsed, float(timing.get("app", "nan")), float(timing.get("model", "nan"))


def drive(
    port: int, users: list[str], turns: int, seed: int, think_s: float = 0.0, jitter: bool = False
) -> tuple[list[tuple[float, float, float]], float]:
    """Run every user's conversation concurrently; return per-message timings and wall time."""
    results: list[tuple[float, float, float]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(index: int, user: str) -> None:
        rng = random.Random(seed * 1000 + index)
        client = Client(port, user)
        if jitter and think_s:  # spread users over one pause, so arrivals are not in lockstep
            time.sleep(rng.uniform(0, think_s))
        try:
            for turn in range(1, turns + 1):
                sample = client.send(message(rng, index, turn))
                with lock:
                    results.append(sample)
                if think_s:
                    time.sleep(think_s)
        except BaseException as err:  # report, don't hang
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i, u)) for i, u in enumerate(users)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    wall = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} users failed, first: {errors[0]!r}")
    return results, wall


def count_round_trips(redis_url: str, port: int, users: list[str], turns: int) -> tuple[float, dict[str, int]]:
    """Return top-level Redis commands per message under MONITOR (MULTI..EXEC counted once)."""
    client = redis.Redis.from_url(redis_url)
    counts: dict[str, int] = defaultdict(int)
    trips = 0
    stop = threading.Event()
    ready = threading.Event()

    def watch() -> None:
        nonlocal trips
        with client.monitor() as monitor:
            ready.set()
            in_multi: set[str] = set()
            for event in monitor.listen():
                if event.get("client_type") == "lua":
                    continue
                command = event["command"].split(" ", 1)[0].strip('"').upper()
                who = str(event.get("client_address")) + str(event.get("client_port"))
                if command == "PING" and stop.is_set():
                    return
                if command in ("INFO", "MONITOR"):
                    continue
                counts[command] += 1
                if command == "MULTI":
                    in_multi.add(who)
                    trips += 1
                elif command == "EXEC":
                    in_multi.discard(who)
                elif who not in in_multi:
                    trips += 1

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait(5)
    time.sleep(0.2)
    drive(port, users, turns, seed=7)
    time.sleep(0.3)
    stop.set()
    redis.Redis.from_url(redis_url).ping()
    watcher.join(5)
    return trips / (len(users) * turns), dict(counts)


def user_bytes(r: redis.Redis, user: str, at_rest: bool = True) -> int:
    """Return MEMORY USAGE summed over the keys of one user. At rest leaves out chat_seen,
    the redelivery records, which expire DEDUP_WINDOW_S after the user's last message."""
    total = 0
    for key in r.scan_iter(match=f"*{{{user}}}*", count=1000):
        if at_rest and key.startswith(b"chat_seen:"):
            continue
        total += r.memory_usage(key, samples=0) or 0  # count every field; the default samples 5
    return total


def wait_for_queue(r: redis.Redis, timeout: float = 180) -> None:
    """Wait until the summary and facts queues are empty and no job is running."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        idle = all(
            r.llen(f"rq:queue:{q}") == 0 and r.zcard(f"rq:started:{q}") == 0 for q in ("summaries", "facts")
        )
        if idle:
            return
        time.sleep(0.2)


def run_strategy(args: argparse.Namespace, redis_url: str, model_url: str, strategy: str) -> dict[str, Any]:
    """Run every phase for one strategy and return its figures."""
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    reset_model(model_url)
    stack = Stack(args, redis_url, model_url, strategy)
    out: dict[str, Any] = {"strategy": strategy}
    try:
        stack.start_web()
        # A: overhead at concurrency, no worker (its polling would blur the Redis figures).
        users = [f"+1555{i:07d}" for i in range(args.users)]
        drive(stack.port, users[:4], 2, seed=1)  # warm up connections and scripts
        samples, wall = drive(stack.port, users, args.turns, seed=2, think_s=args.pace_ms / 1000, jitter=True)
        overhead = [app - model for _, app, model in samples]
        out["overhead_ms"] = {q: pct(overhead, q) for q in (50, 95, 99)}
        out["client_ms"] = {q: pct([c * 1000 for c, _, _ in samples], q) for q in (50, 95, 99)}
        out["msgs_per_s"] = len(samples) / wall
        # R: round trips per message.
        r.flushdb()
        rt_users = [f"+1556{i:07d}" for i in range(5)]
        out["round_trips_per_msg"], out["commands"] = count_round_trips(redis_url, stack.port, rt_users, 12)
        # B: long conversations with summaries.
        r.flushdb()
        reset_model(model_url)
        if strategy == "compact":
            stack.start_worker()
        dropped_before = sum(int(e.get("dropped", 0)) for e in stack.web_events("summary.pending_dropped"))
        long_users = [f"+1557{i:07d}" for i in range(args.long_users)]
        drive(stack.port, long_users, args.long_turns, seed=3, think_s=args.think_ms / 1000)
        wait_for_queue(r)
        if strategy == "compact":  # let the users go quiet: their idle summaries run
            deadline = time.time() + IDLE_S + 30
            time.sleep(IDLE_S + 1)
            while time.time() < deadline and any(r.zcard(f"rq:scheduled:{q}") for q in ("summaries", "facts")):
                time.sleep(0.2)
            wait_for_queue(r)
        time.sleep(0.5)
        sizes = [user_bytes(r, u) for u in long_users]
        out["bytes_per_user"] = {"mean": statistics.mean(sizes), "max": max(sizes)}
        window = [user_bytes(r, u, at_rest=False) - rest for u, rest in zip(long_users, sizes)]
        out["seen_bytes_per_user"] = statistics.mean(window)
        usage = model_usage(model_url)
        out.update(token_figures(usage, args.long_users * args.long_turns))
        out["dropped"] = (
            sum(int(e.get("dropped", 0)) for e in stack.web_events("summary.pending_dropped")) - dropped_before
        )
        if stack.worker_log is not None:
            lags = [float(e["lag_ms"]) for e in _events(stack.worker_log, "summary.stored") if e.get("lag_ms")]
            out["summary_lag_ms"] = {"n": len(lags), 50: pct(lags, 50), 99: pct(lags, 99)}
    finally:
        stack.stop()
        for path in (stack.worker_log, stack.web_log):
            if path is not None:
                path.unlink(missing_ok=True)
    return out


def _events(path: Path | None, name: str) -> list[dict[str, Any]]:
    """Return the JSON log events with this name from a process's log file."""
    if path is None or not path.exists():
        return []
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            events.append(event)
    return events


def reset_model(model_url: str) -> None:
    """Forget the stand-in's recorded usage."""
    base = model_url.removesuffix("/v1")
    with urlopen(f"{base}/_standin/reset", data=b"{}", timeout=5):
        pass


def model_usage(model_url: str) -> list[dict[str, Any]]:
    """Return the stand-in's per-request token figures."""
    base = model_url.removesuffix("/v1")
    with urlopen(f"{base}/_standin/requests", timeout=30) as response:
        return json.load(response)["requests"]


def token_figures(usage: list[dict[str, Any]], messages: int) -> dict[str, Any]:
    """Prompt tokens by turn for replies, and all model tokens per message."""
    by_turn: dict[int, list[int]] = defaultdict(list)
    by_purpose: dict[str, int] = defaultdict(int)
    summary_calls = 0
    extraction_calls = 0
    for u in usage:
        text = u["last_user"]
        purpose = "summary" if text.startswith("Current summary:") else (
            "extraction" if text.startswith("Known facts:") else "reply")
        by_purpose[purpose] += u["prompt_tokens"] + u["completion_tokens"]
        if purpose == "summary":
            summary_calls += 1
            continue
        if purpose == "extraction":
            extraction_calls += 1
            continue
        if " turn " in text:
            turn = int(text.split(" turn ", 1)[1].split(":", 1)[0])
            by_turn[turn].append(u["prompt_tokens"])
    replies = [t for ts in by_turn.values() for t in ts]
    return {
        "prompt_tokens_by_turn": {t: statistics.mean(v) for t, v in sorted(by_turn.items())},
        "prompt_tokens_max": max(replies) if replies else 0,
        "model_tokens_per_msg": sum(by_purpose.values()) / messages if messages else 0,
        "reply_summary_tokens_per_msg": (by_purpose["reply"] + by_purpose["summary"]) / messages if messages else 0,
        "extraction_tokens_per_msg": by_purpose["extraction"] / messages if messages else 0,
        "summary_calls": summary_calls,
        "extraction_calls": extraction_calls,
    }


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Print the figures side by side, with compact/baseline ratios."""
    compact = next(r for r in results if r["strategy"] == "compact")
    baseline = next((r for r in results if r["strategy"] == "full_history"), None)
    print()
    print(f"# bench_webhook: {args.users} users x {args.turns} turns (overhead, pace {args.pace_ms} ms), "
          f"{args.long_users} x {args.long_turns} turns (long), model latency {args.latency_ms} ms, "
          f"reply {args.reply_chars} chars, gunicorn {args.web_workers}x{args.threads} gthread, {os.cpu_count()} cores")
    rows: list[tuple[str, Any, Any]] = []
    for q in (50, 95, 99):
        rows.append((f"server overhead p{q} (ms)", compact["overhead_ms"][q], baseline and baseline["overhead_ms"][q]))
    for q in (50, 99):
        rows.append((f"client round trip p{q} (ms)", compact["client_ms"][q], baseline and baseline["client_ms"][q]))
    rows.append(("messages per second", compact["msgs_per_s"], baseline and baseline["msgs_per_s"]))
    rows.append(("Redis round trips per message", compact["round_trips_per_msg"], baseline and baseline["round_trips_per_msg"]))
    turns = [1, 2, 5, 6, 10, 11, 20, 50, 100, 150, args.long_turns]
    for t in sorted(set(x for x in turns if x <= args.long_turns)):
        rows.append((f"prompt tokens, turn {t}", compact["prompt_tokens_by_turn"].get(t),
                     baseline and baseline["prompt_tokens_by_turn"].get(t)))
    rows.append(("prompt tokens, max over all replies", compact["prompt_tokens_max"], baseline and baseline["prompt_tokens_max"]))
    rows.append(("model tokens/msg, replies + summaries", compact["reply_summary_tokens_per_msg"],
                 baseline and baseline["reply_summary_tokens_per_msg"]))
    rows.append(("model tokens/msg, fact extraction", compact["extraction_tokens_per_msg"],
                 baseline and baseline["extraction_tokens_per_msg"]))
    rows.append(("model tokens/msg, all (amortised)", compact["model_tokens_per_msg"], baseline and baseline["model_tokens_per_msg"]))
    rows.append((f"Redis bytes per user after {args.long_turns} turns, at rest (mean)", compact["bytes_per_user"]["mean"],
                 baseline and baseline["bytes_per_user"]["mean"]))
    rows.append(("Redis bytes per user, at rest (max)", compact["bytes_per_user"]["max"],
                 baseline and baseline["bytes_per_user"]["max"]))
    rows.append(("+ redelivery records inside the window (mean)", compact["seen_bytes_per_user"],
                 baseline and baseline["seen_bytes_per_user"]))
    print(f"{'figure':<48} {'compact':>12} {'full-history':>14} {'ratio':>8}")
    for name, a, b in rows:
        ratio = (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None
        fa = f"{a:,.2f}" if isinstance(a, float) else (f"{a:,}" if a is not None else "-")
        fb = f"{b:,.2f}" if isinstance(b, float) else (f"{b:,}" if b is not None else "-")
        print(f"{name:<48} {fa:>12} {fb:>14} {(f'{ratio:.2f}' if ratio else '-'):>8}")
    lag = compact.get("summary_lag_ms")
    if lag:
        print(f"summary lag, trigger to stored (ms): p50 {lag[50]:.1f}  p99 {lag[99]:.1f}  (n={lag['n']}, "
              f"summary calls {compact['summary_calls']}, extraction calls {compact['extraction_calls']})")
    print(f"Redis commands seen in phase R (compact): {compact['commands']}")
    print(f"pending pairs dropped unsummarized in phase B (compact): {compact.get('dropped', 0)}")


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--long-users", type=int, default=5)
    parser.add_argument("--long-turns", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    # 0: every user sends its next message the moment the reply lands (a saturation test).
    parser.add_argument("--pace-ms", type=float, default=0.0, help="pause between a user's turns in phase A")
    # People type: a user's next message comes some time after the reply, never instantly.
    parser.add_argument("--think-ms", type=float, default=100.0, help="pause between a user's turns in phase B")
    parser.add_argument("--reply-chars", type=int, default=400)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--strategies", default="compact,full_history")
    args = parser.parse_args()
    if args.users * args.turns > 20_000 or args.long_users * args.long_turns > 20_000:
        raise SystemExit("keep the benchmark bounded: at most 20,000 messages a phase")

    embedded = None
    redis_url = os.environ.get("BENCH_REDIS_URL")
    tmp = tempfile.TemporaryDirectory(prefix="bench-redis-")
    if not redis_url:
        embedded = start_embedded_redis(Path(tmp.name) / "bench.db", tcp=True)
        redis_url = embedded.url
    model_port = free_port()
    model = subprocess.Popen(
        [sys.executable, "-m", "bot.dev.standin", "--port", str(model_port), "--latency-ms", str(args.latency_ms),
         "--reply-chars", str(args.reply_chars), "--record", "usage"],
        cwd=ROOT, stderr=subprocess.DEVNULL,
    )
    model_url = f"http://127.0.0.1:{model_port}/v1"
    try:
        for _ in range(50):
            try:
                with urlopen(f"http://127.0.0.1:{model_port}/v1/models", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        results = [run_strategy(args, redis_url, model_url, s) for s in args.strategies.split(",")]
        report(results, args)
    finally:
        model.terminate()
        model.wait(10)
        if embedded is not None:
            embedded.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
