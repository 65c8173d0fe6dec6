"""Keep the RQ worker running: `python -m workers.supervise rq worker …` (the Procfile's worker).

RQ's worker quits on a Redis error outside its dequeue loop ("found an unhandled exception,
quitting"), and nothing brought it back: no summary or fact was made again. The supervisor
restarts it: at once when Redis answers again after an outage (polled every half second, so
work resumes within seconds), with a growing pause when it keeps crashing while Redis is
fine (a bad setting must not spin). SIGTERM and SIGINT go to the worker, which finishes its
job (RQ's warm shutdown); then the supervisor exits with the worker's code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import redis

#: How often Redis is asked whether it is back.
POLL_S = 0.5
#: A worker that ran this long was not crash-looping: restart it without a pause.
HEALTHY_RUN_S = 30.0
#: The longest pause between restarts of a worker that keeps crashing.
MAX_PAUSE_S = 30.0


def say(event: str, **fields: object) -> None:
    """Log one line to stderr (the worker's own logs go there too)."""
    detail = " ".join(f"{k}={v}" for k, v in fields.items())
    print(f"[supervise] {event} {detail}".rstrip(), file=sys.stderr, flush=True)


def redis_answers(url: str) -> bool:
    """Return whether Redis answers a PING."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def main(argv: list[str] | None = None) -> int:
    """Run the command, restarting it whenever it exits until we are told to stop."""
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m workers.supervise rq worker [options] QUEUE…", file=sys.stderr)
        return 2
    url = os.environ.get("QUEUE_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pause = 0.0
    code = 0
    while not stopping:
        started = time.monotonic()
        # A session of its own: a signal sent to our whole group (Ctrl-C, a platform stopping
        # every process) reaches the worker once, through us; twice would make RQ kill the job.
        child = subprocess.Popen(command, start_new_session=True)
        if stopping:  # the signal came while we were starting it
            child.send_signal(signal.SIGTERM)
        code = child.wait()
        if stopping:
            break
        ran = time.monotonic() - started
        if redis_answers(url):
            # Redis is fine: the worker crashed or quit on its own. Back off if it keeps doing so.
            pause = 0.0 if ran >= HEALTHY_RUN_S else min(MAX_PAUSE_S, max(1.0, pause * 2))
            say("worker.exited", code=code, ran_s=round(ran, 1), restart_in_s=pause)
            deadline = time.monotonic() + pause
            while not stopping and time.monotonic() < deadline:
                time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
        else:
            say("worker.exited", code=code, ran_s=round(ran, 1), reason="redis_unreachable")
            while not stopping and not redis_answers(url):
                time.sleep(POLL_S)
            pause = 0.0
            if not stopping:
                say("redis.back", restarting=True)
    return code if code >= 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
