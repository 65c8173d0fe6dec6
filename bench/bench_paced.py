"""Paced load on the Procfile's processes at production sizing (gunicorn 2 x 32 threads, the
worker supervisor with WORKER_PROCESSES RQ workers), with a slow model.

Prints figures; asserts nothing. Everything runs on 127.0.0.1, and the run is bounded by
--seconds (plus at most --drain-s to let background work finish).

    .venv/bin/python bench/bench_paced.py                      # 100 users, every 6-10 s, 1 s model
    .venv/bin/python bench/bench_paced.py --users 200 --seconds 90
    .venv/bin/python bench/bench_paced.py --topology cluster   # user state on a 3-master cluster

Figures: reply latency as the client sees it (p50/p99/max), busy replies, background lag by
job (from the job entering its queue, i.e. when it was due, to its end: the bot's own
bot_background_lag_seconds histogram, so a bucket's upper bound), background model calls
per message, the bytes of RQ job records left per 1,000 messages, and Redis commands per message
(and per second at idle), every process included.
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
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import urlencode
from urllib.request import urlopen

import redis
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import pct  # noqa: E402
from bot.dev.embedded import free_port, start_embedded_redis, start_redis_cluster  # noqa: E402
from bot.dev.processes import stop_tagged, tagged_env  # noqa: E402

TOKEN = "bench-auth-token-0123456789"
SAYINGS = [
    "My name is {name} and I live in {city}.", "What should I see in {city} this weekend?",
    "I'm allergic to peanuts, any dinner ideas?", "I love jazz, where can I hear some tonight?",
    "How do I get from the airport to the centre?", "Any quiet cafe to work from?",
    "What's a good day trip from {city}?", "I work as a nurse, so mornings are busy for me.",
]
NAMES = ["Ana", "Rui", "Marta", "Joao", "Ines", "Tiago", "Sofia", "Pedro"]
CITIES = ["Lisbon", "Porto", "Braga", "Coimbra", "Faro"]


#: Seconds every process is watched at idle, before the load.
IDLE_WINDOW_S = 10.0


def commands(client: redis.Redis) -> int:
    """Return the commands the Redis server has processed (clients', not scripts' own)."""
    return int(client.info("stats")["total_commands_processed"])


class TopLevel(threading.Thread):
    """Counts the commands clients send (MONITOR; scripts' own calls left out, a MULTI..EXEC
    counted as its commands), and by the kind of process that sent them."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.count, self.stop = url, 0, threading.Event()
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.by_kind: dict[str, int] = {}
        self.owners: dict[int, tuple[str, int]] = {}  # client port -> (kind, pid)

    def _owner(self, port: int) -> tuple[str, int]:
        if port not in self.owners:
            import psutil

            for conn in psutil.net_connections(kind="tcp"):
                if conn.raddr and conn.raddr.port == self.port and conn.pid:
                    try:
                        cmd = " ".join(psutil.Process(conn.pid).cmdline())
                    except psutil.Error:
                        continue
                    kind = "web" if "gunicorn" in cmd else "rq worker" if "rq worker" in cmd else "other"
                    self.owners[conn.laddr.port] = (kind, conn.pid)
        return self.owners.get(port, ("other", 0))

    def run(self) -> None:
        client = redis.Redis.from_url(self.url)
        with client.monitor() as monitor:
            for event in monitor.listen():
                if self.stop.is_set():
                    break
                if event.get("client_type") != "lua" and not event["command"].upper().startswith(("MONITOR", "INFO")):
                    self.count += 1
                    kind = self._owner(int(event.get("client_port") or 0))[0]
                    self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        client.close()

    def finish(self) -> int:
        """Stop counting (a PING wakes the listener) and return the count."""
        self.stop.set()
        redis.Redis.from_url(self.url).ping()
        self.join(10)
        return self.count


def command_stats(client: redis.Redis) -> dict[str, int]:
    """Return calls per command (INFO commandstats, scripts' own calls included), and the
    clients' total under "~total"."""
    stats = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in client.info("commandstats").items()}
    return {**stats, "~total": commands(client)}


def histogram_pct(metrics: str, name: str, label: str, q: float) -> tuple[float, int]:
    """Return (the upper bound of the bucket holding the q-th percentile, count) of one
    labelled Prometheus histogram in /metrics text."""
    buckets: list[tuple[float, float]] = []
    for line in metrics.splitlines():
        if line.startswith(f"{name}_bucket{{") and label in line:
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and count >= q / 100 * total:
            return bound, int(total)
    return float("nan"), int(total)


class User(threading.Thread):
    """One WhatsApp user: a message every --min-s to --max-s seconds after the last reply."""

    def __init__(self, port: int, number: str, until: float, pace: tuple[float, float], out: list) -> None:
        super().__init__(daemon=True)
        self.port, self.number, self.until, self.pace, self.out = port, number, until, pace, out
        self.validator = RequestValidator(TOKEN)
        self.rng = random.Random(number)
        self.facts = {"name": self.rng.choice(NAMES), "city": self.rng.choice(CITIES)}

    def run(self) -> None:
        time.sleep(self.rng.uniform(0, self.pace[1]))  # users do not all start at once
        url = f"http://127.0.0.1:{self.port}/whatsapp"
        while time.monotonic() < self.until:
            body = self.rng.choice(SAYINGS).format(**self.facts)
            form = {"From": f"whatsapp:{self.number}", "To": "whatsapp:+14155238886", "Body": body,
                    "MessageSid": "SM" + uuid.uuid4().hex, "NumMedia": "0", "AccountSid": "AC" + "0" * 32}
            started = time.monotonic()
            status, text = 0, ""
            try:
                conn = HTTPConnection("127.0.0.1", self.port, timeout=20)
                conn.request("POST", "/whatsapp", urlencode(form), {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Twilio-Signature": self.validator.compute_signature(url, form)})
                response = conn.getresponse()
                status, text = response.status, response.read().decode()
                timing = response.getheader("Server-Timing") or ""
                conn.close()
            except OSError as err:
                text, timing = str(err), ""
            server_ms = None
            if "app;dur=" in timing and "model;dur=" in timing:  # ours = the app's time minus the model's
                app_ms = float(timing.split("app;dur=", 1)[1].split(",", 1)[0])
                server_ms = (app_ms, app_ms - float(timing.split("model;dur=", 1)[1].split(",", 1)[0]))
            self.out.append((time.monotonic() - started, status, "a lot of messages" in text, server_ms, started))
            time.sleep(self.rng.uniform(*self.pace))


def process_kind(cmdline: str) -> str:
    """Return which Procfile process (or stand-in) a command line is."""
    if "gunicorn" in cmdline:
        return "web"
    if "rq worker" in cmdline or "workers.supervise" in cmdline:
        return "workers"
    if "local_embeddings" in cmdline:
        return "embed"
    return "other"


def cpu_seconds(root_pid: int) -> dict[int, tuple[str, float]]:
    """Return each process under root_pid: its kind and its CPU seconds, its reaped children's
    included (an RQ job's work horse is counted in its worker once it has exited)."""
    import psutil

    out: dict[int, tuple[str, float]] = {}
    try:
        tree = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return out
    for proc in tree:
        try:
            t = proc.cpu_times()
            out[proc.pid] = (process_kind(" ".join(proc.cmdline())),
                             t.user + t.system + t.children_user + t.children_system)
        except psutil.Error:
            continue
    return out


def cpu_by_kind(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """Return the CPU seconds each kind of process spent between two cpu_seconds() looks."""
    spent: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        spent[kind] = spent.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
    return spent


def embed_messages(port: int) -> dict[str, float]:
    """Return the `embed` process's own view of the messages' requests (p50/p99 ms)."""
    try:
        return json.loads(urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()).get("messages", {})
    except OSError:
        return {}


def embed_spent(port: int) -> dict[tuple[str, str], tuple[int, float]]:
    """Return what the `embed` process has embedded so far, by model and kind (message or
    background): (texts, CPU seconds); empty when it is not running (--bare)."""
    try:
        health = json.loads(urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read())
    except OSError:
        return {}
    return {(row["model"], row["kind"]): (row["texts"], row["cpu_s"]) for row in health.get("spent", [])}


def job_record_bytes(client: redis.Redis) -> dict[str, int]:
    """Return MEMORY USAGE over the RQ keys in the queue Redis, by kind (rq:job, rq:worker…);
    the records of jobs still scheduled to run (idle summaries wait SUMMARY_IDLE_S) apart."""
    scheduled = {f"rq:job:{member.decode()}" for key in client.scan_iter(match="rq:scheduled:*")
                 for member in client.zrange(key, 0, -1)}
    kinds: dict[str, int] = {}
    for key in client.scan_iter(match="rq:*", count=500):
        name = key.decode()
        kind = "rq:job (scheduled, still to run)" if name in scheduled else ":".join(name.split(":")[:2])
        kinds[kind] = kinds.get(kind, 0) + (client.memory_usage(key, samples=0) or 0)
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long users keep writing")
    parser.add_argument("--min-s", type=float, default=6.0)
    parser.add_argument("--max-s", type=float, default=10.0)
    parser.add_argument("--latency-ms", type=float, default=1000.0, help="the model's time per call")
    parser.add_argument("--drain-s", type=float, default=60.0, help="longest wait for background work")
    parser.add_argument("--topology", choices=["single", "cluster"], default="single")
    parser.add_argument("--bare", action="store_true",
                        help="the Procfile's web line serving a bare Flask app (bench/bare_app.py): the baseline")
    parser.add_argument("--no-monitor", action="store_true",
                        help="no MONITOR while users write (it slows Redis for every process): latency without it")
    args = parser.parse_args()
    tag_env = tagged_env()
    with tempfile.TemporaryDirectory(prefix="bench-paced-") as tmp:
        tmp_path = Path(tmp)
        queue_redis = start_embedded_redis(tmp_path / "queue" / "q.db", tcp=True)
        cluster = start_redis_cluster(tmp_path / "cluster") if args.topology == "cluster" else None
        model_port, port, embed_port = free_port(), free_port(), free_port()
        (tmp_path / "prom").mkdir()
        env = {
            **tag_env, "REDIS_URL": cluster.url if cluster else queue_redis.url,
            "QUEUE_REDIS_URL": queue_redis.url, "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "OPENAI_API_KEY": "bench", "TWILIO_AUTH_TOKEN": TOKEN, "PORT": str(port), "LOG_LEVEL": "WARNING",
            "EMBEDDING_PORT": str(embed_port),  # the Procfile's `embed`, both models, its own port
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        log = open(tmp_path / "procs.log", "wb")
        model = subprocess.Popen([sys.executable, "-m", "bot.dev.standin", "--port", str(model_port),
                                  "--latency-ms", str(args.latency_ms), "--record", "usage"],
                                 env=env, stdout=log, stderr=log)
        procfile = ROOT / "Procfile"
        if args.bare:  # the same gunicorn line, a bare app: what the bot adds is the difference
            web = next(line for line in procfile.read_text().splitlines() if line.startswith("web:"))
            procfile = tmp_path / "Procfile.bare"
            procfile.write_text(web.replace("'bot:create_app()'", "bench.bare_app:app") + "\n")
        procs = subprocess.Popen([sys.executable, "-m", "honcho", "start", "-f", str(procfile), "-d", str(ROOT)],
                                 env=env, stdout=log, stderr=log, cwd=ROOT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status == 200:
                        break
                except OSError:
                    time.sleep(0.3)
            time.sleep(3)  # the workers
            queue = redis.Redis.from_url(queue_redis.url)
            idle_from = commands(queue)
            idle_watch = TopLevel(queue_redis.url)
            idle_watch.start()
            time.sleep(IDLE_WINDOW_S)  # every process up, no message: what they cost at idle
            idle_watch.finish()
            idle = commands(queue) - idle_from
            before = command_stats(queue)
            cpu_before = cpu_seconds(procs.pid)
            embed_before = embed_spent(embed_port)
            out: list[tuple[float, int, bool, tuple[float, float] | None, float]] = []
            load_from = time.monotonic()
            until = time.monotonic() + args.seconds
            users = [User(port, f"+3519{i:08d}", until, (args.min_s, args.max_s), out) for i in range(args.users)]
            top_level = TopLevel(queue_redis.url)
            if not args.no_monitor:
                top_level.start()
            for user in users:
                user.start()
            for user in users:
                user.join(args.seconds + 60)
            sent_top_level = 0 if args.no_monitor else top_level.finish()
            during = {k: v - before.get(k, 0) for k, v in command_stats(queue).items()}
            drain_until = time.monotonic() + args.drain_s
            while time.monotonic() < drain_until:
                busy = sum(queue.llen(k) for k in (b"rq:queue:summaries", b"rq:queue:facts"))
                busy += queue.zcard("rq:scheduled:facts")  # idle summaries wait SUMMARY_IDLE_S: not waited for
                busy += sum(queue.zcard(f"rq:wip:{q}") for q in ("summaries", "facts"))
                if not busy:
                    break
                time.sleep(0.5)
            cpu = cpu_by_kind(cpu_before, cpu_seconds(procs.pid))
            embed_after = embed_spent(embed_port)
            embed_seen = embed_messages(embed_port)
            metrics = "" if args.bare else urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            requests = json.loads(urlopen(f"http://127.0.0.1:{model_port}/_standin/requests").read())["requests"]
            record_bytes = job_record_bytes(queue)
        finally:
            procs.send_signal(15)
            try:
                procs.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(procs.pid, 9)
            model.terminate()
            model.wait(10)
            stop_tagged(tag_env["BOT_PROCESS_TAG"])
            queue_redis.stop()
            if cluster:
                cluster.stop()
            log.close()

    latencies = [s * 1000 for s, status, _, _, _ in out if status == 200]
    server = [ms[0] for _, status, _, ms, _ in out if status == 200 and ms is not None]
    ours = [ms[1] for _, status, _, ms, _ in out if status == 200 and ms is not None]
    by_time = sorted((at - load_from, ms[1]) for _, status, _, ms, at in out if status == 200 and ms is not None)
    messages = len(out)
    extraction_calls = sum(1 for r in requests if r["last_user"].startswith("Known facts:"))
    summary_calls = sum(1 for r in requests if r["last_user"].startswith("Current summary:"))
    reply_calls = len(requests) - extraction_calls - summary_calls
    print(f"\n# bench_paced: {args.users} users, a message every {args.min_s:g}-{args.max_s:g} s for "
          f"{args.seconds:g} s, model {args.latency_ms:g} ms, user state on {args.topology}, Procfile defaults")
    print(f"messages sent                     {messages}  ({messages / args.seconds:.1f}/s)")
    print(f"HTTP errors / busy replies        {sum(1 for _, st, _, _, _ in out if st != 200)} / {sum(1 for _, _, b, _, _ in out if b)}")
    print(f"reply ms p50 / p99 / max          {pct(latencies, 50):.0f} / {pct(latencies, 99):.0f} / {max(latencies, default=0):.0f}"
          f"  (mean {statistics.fmean(latencies) if latencies else float('nan'):.0f})")
    print(f"  in the server (Server-Timing)   {pct(server, 50):.0f} / {pct(server, 99):.0f} / {max(server, default=0):.0f}"
          "  (the rest is the load generator's own threads on the same 2 cores)")
    print(f"  the bot's own, model excluded   {pct(ours, 50):.1f} / {pct(ours, 99):.1f} / {max(ours, default=0):.1f}")
    step = max(args.seconds / 6, 1.0)
    print("    by when it was sent (s): " + ", ".join(
        f"{lo:.0f}-{lo + step:.0f} p99 {pct([ms for at, ms in by_time if lo <= at < lo + step], 99):.0f}"
        for lo in [i * step for i in range(6)]) + " ms")
    print("CPU ms per message, by process     " + ", ".join(
        f"{kind} {seconds * 1000 / max(messages, 1):.1f}" for kind, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]))
        + "  (from the load's start to the end of the drain)")
    for (name, kind), (texts, seconds) in sorted(embed_after.items()):
        texts -= embed_before.get((name, kind), (0, 0.0))[0]
        seconds -= embed_before.get((name, kind), (0, 0.0))[1]
        print(f"  embed {name} {kind}: {texts / max(messages, 1):.2f} texts and {seconds * 1000 / max(messages, 1):.1f} "
              f"CPU ms per message ({seconds * 1000 / max(texts, 1):.1f} ms per text)")
    if args.bare:
        print("(--bare: the Procfile's gunicorn line serving bench/bare_app.py; no bot, no workers)")
        return 0
    if embed_seen:
        print(f"  embed, messages' requests as the server saw them: p50 {embed_seen['p50_ms']} / p99 "
              f"{embed_seen['p99_ms']} ms, of it waiting for the lock p50 {embed_seen['wait_p50_ms']} / p99 "
              f"{embed_seen['wait_p99_ms']} ms ({embed_seen['requests']:.0f} requests, both models, whole run)")
    steps = sorted({line.split('step="', 1)[1].split('"', 1)[0] for line in metrics.splitlines()
                    if line.startswith("bot_step_seconds_bucket{")})
    slow = [(step, histogram_pct(metrics, "bot_step_seconds", f'step="{step}"', 99)[0]) for step in steps]
    print("steps' p99 (bucket, s): " + ", ".join(f"{step} <= {p99:g}" for step, p99 in sorted(slow, key=lambda kv: -kv[1])[:8]))
    gc_pauses = []
    for generation in ("0", "1", "2"):
        longest, n = histogram_pct(metrics, "bot_gc_pause_seconds", f'generation="{generation}"', 100)
        total = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                    if line.startswith(f'bot_gc_pause_seconds_sum{{generation="{generation}"}}'))
        gc_pauses.append(f"gen {generation}: {n} pauses, longest <= {longest:g} s, {total * 1000:.0f} ms in all")
    print("web's garbage collections: " + "; ".join(gc_pauses))
    for job in ("summary", "extraction"):
        p50, n = histogram_pct(metrics, "bot_background_lag_seconds", f'job="{job}"', 50)
        p99, _ = histogram_pct(metrics, "bot_background_lag_seconds", f'job="{job}"', 99)
        print(f"{job} lag s p50 / p99 (bucket)   <= {p50:g} / <= {p99:g}  ({n} jobs)")
    print(f"model calls: replies {reply_calls}, summaries {summary_calls}, extractions {extraction_calls}; "
          f"background calls per message {(summary_calls + extraction_calls) / max(messages, 1):.2f}")
    looks = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                if line.startswith('bot_extractions_total{result="waiting"}'))
    print(f"extraction looks that found the user still writing: {looks:.0f} ({looks / max(messages, 1):.2f} per message)")
    sent = during.pop("~total", 0)
    print(f"Redis commands per message        {sent / max(messages, 1):.1f} while users wrote, every process "
          f"included (web, workers, scheduler; user state and queues on one Redis); at idle {idle / IDLE_WINDOW_S:.1f}/s")
    print(f"  top-level (what the processes send, a script counted once; MONITOR while users wrote): "
          f"{sent_top_level / max(messages, 1):.1f} per message")
    processes = {kind: len({pid for k, pid in idle_watch.owners.values() if k == kind}) for kind in idle_watch.by_kind}
    idle_kinds = {"web": 0, **idle_watch.by_kind}
    print("  at idle, as clients send them, by process: " + ", ".join(
        f"{kind} {count / IDLE_WINDOW_S:.1f}/s" + (f" over {processes[kind]} process(es)" if processes.get(kind) else "")
        for kind, count in sorted(idle_kinds.items(), key=lambda kv: -kv[1])))
    top = sorted(during.items(), key=lambda kv: -kv[1])[:8]
    print("  most called (scripts' own calls included): " + ", ".join(
        f"{name} {count / max(messages, 1):.1f}" for name, count in top))
    total = sum(record_bytes.values())
    jobs_only = record_bytes.get("rq:job", 0)
    waiting = record_bytes.get("rq:job (scheduled, still to run)", 0)
    print(f"RQ keys after the run             {total} B: records of finished jobs {jobs_only} B "
          f"({jobs_only / max(messages, 1) * 1000:.0f} B per 1,000 messages), of jobs still scheduled "
          f"{waiting} B; by kind {record_bytes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
