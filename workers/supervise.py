"""Keep N RQ workers running: `python -m workers.supervise --processes N rq worker …` (the
Procfile's worker; N is WORKER_PROCESSES there). Each worker runs one job at a time, and a
job mostly waits on the model, so N is sized as jobs per second x model seconds (README).

RQ's worker quits on a Redis error outside its dequeue loop ("found an unhandled exception,
quitting"), and nothing brought it back: no summary or fact was made again. The supervisor
restarts it: at once when Redis answers again after an outage (polled every half second, so
work resumes within seconds), with a growing pause when it keeps crashing while Redis is
fine (a bad setting must not spin). SIGTERM and SIGINT go to the worker, which finishes its
job (RQ's warm shutdown); then the supervisor exits with the worker's code.

A worker that dies mid-job (killed, out of memory) leaves its job in RQ's started registry,
where it counts as abandoned only when its heartbeat runs out. The supervisor names each
`rq worker` it starts, so when one dies it marks that worker's jobs abandoned at once; and
when the whole group died with its supervisor (a container's OOM kill), the next supervisor
started on the same machine does the same at its start for every worker of this machine
whose process is gone. The pool's next maintenance (every `--maintenance-interval` seconds,
and at each worker's start) redoes them at once (workers/abandoned.py, docs/conversation.md).
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

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


def is_rq_worker(command: list[str]) -> bool:
    """Return whether the command starts an RQ worker that the supervisor may name."""
    return len(command) > 1 and Path(command[0]).name == "rq" and command[1] == "worker" and not any(
        arg in ("--name", "-n") or arg.startswith("--name=") for arg in command)


def rescue(url: str, name: str) -> list[str]:
    """Mark the jobs of the dead worker `name` abandoned now; return their ids.

    Each execution the worker had started gets a heartbeat that has run out, in its queue's
    started registry: the next maintenance of any worker (StartedJobRegistry.cleanup) runs
    the job's failure callback, then retries it (or files it as failed with none left).
    """
    from rq.job import Job
    from rq.exceptions import NoSuchJobError
    from rq.registry import StartedJobRegistry
    from rq.worker import Worker

    connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=connection)
        if worker is None:
            return []
        rescued = []
        for execution in worker.get_current_executions(refresh=True):
            try:
                job = Job.fetch(execution.job_id, connection=connection)
            except NoSuchJobError:
                continue
            registry = StartedJobRegistry(job.origin, connection=connection)
            if connection.zadd(registry.key, {execution.composite_key: 0}, xx=True, ch=True):
                rescued.append(job.id)
        return rescued
    finally:
        connection.close()


def machine_tag() -> str:
    """Return a short tag of this machine as its processes see it: the kernel's boot and the
    PID namespace, so that a worker's PID means the same process to every supervisor that
    shares the tag (two containers on one host share a hostname, not a PID namespace)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: no tag, no neighbours to look after
        return ""
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:8]


def worker_prefix() -> str:
    """Return how the names of this machine's supervised workers start ("" when unknown)."""
    tag = machine_tag()
    return f"{socket.gethostname()}.{tag}." if tag else ""


def pid_alive(pid: int) -> bool:
    """Return whether a process with this PID runs on this machine (a zombie, dead but not
    yet reaped by an init that may never reap it, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def rescue_dead_neighbours(url: str) -> list[str]:
    """Mark abandoned now the jobs of this machine's supervised workers whose process is gone
    (the whole group was killed, supervisor included); return their ids."""
    from rq.worker import Worker

    prefix = worker_prefix()
    if not prefix:
        return []
    connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        dead = [w.name for w in Worker.all(connection=connection)
                if w.name.startswith(prefix) and w.pid and not pid_alive(int(w.pid))]
    finally:
        connection.close()
    return [job for name in dead for job in rescue(url, name)]


class Slot(threading.Thread):
    """One worker process, started again whenever it exits, until the supervisor stops."""

    def __init__(self, command: list[str], url: str, stopping: threading.Event) -> None:
        super().__init__(daemon=True)
        self.command = command
        self.url = url
        self.stopping = stopping
        self.child: subprocess.Popen[bytes] | None = None
        self.code = 0
        self.named = is_rq_worker(command)
        self.worker_name = ""

    def signal(self, signum: int) -> None:
        """Pass a stop signal on to the worker process."""
        child = self.child
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    def run(self) -> None:
        pause = 0.0
        while not self.stopping.is_set():
            started = time.monotonic()
            # A session of its own: a signal sent to our whole group (Ctrl-C, a platform
            # stopping every process) reaches the worker once, through us; twice would make
            # RQ kill the job.
            command = self.command
            if self.named:  # unique, so that a dead worker's jobs can be found (rescue)
                self.worker_name = f"{worker_prefix() or socket.gethostname() + '.'}{os.getpid()}.{uuid.uuid4().hex[:8]}"
                command = [*command[:2], "--name", self.worker_name, *command[2:]]
            try:
                self.child = subprocess.Popen(command, start_new_session=True)
            except OSError as err:  # cannot start it (no memory, no such command): retry, loudly
                pause = min(MAX_PAUSE_S, max(1.0, pause * 2))
                say("worker.not_started", error=f"{type(err).__name__}: {err}", retry_in_s=pause)
                self.code = 1
                self.stopping.wait(pause)
                continue
            if self.stopping.is_set():  # the signal came while we were starting it
                self.child.send_signal(signal.SIGTERM)
            code = self.child.wait()
            if self.stopping.is_set():  # killed by our stop signal: its last exit of its own stands
                self.code = code if code >= 0 else self.code
                break
            self.code = code
            ran = time.monotonic() - started
            if redis_answers(self.url):
                self.rescue()
                # Redis is fine: the worker crashed or quit on its own. Back off if it keeps doing so.
                pause = 0.0 if ran >= HEALTHY_RUN_S else min(MAX_PAUSE_S, max(1.0, pause * 2))
                say("worker.exited", code=self.code, ran_s=round(ran, 1), restart_in_s=pause)
                self.stopping.wait(pause)
            else:
                say("worker.exited", code=self.code, ran_s=round(ran, 1), reason="redis_unreachable")
                while not self.stopping.is_set() and not redis_answers(self.url):
                    self.stopping.wait(POLL_S)
                pause = 0.0
                if not self.stopping.is_set():
                    say("redis.back", restarting=True)
                    self.rescue()

    def rescue(self) -> None:
        """Hand the jobs of the worker that just died back to the pool (logged, never fatal)."""
        if not self.named or self.code == 0:
            return
        try:
            jobs = rescue(self.url, self.worker_name)
        except Exception as err:  # RQ's heartbeat path still redoes them, later
            say("worker.rescue_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
            return
        if jobs:
            say("worker.jobs_abandoned", worker=self.worker_name, jobs=",".join(jobs))


def rescue_at_start(url: str) -> None:
    """Hand the jobs of this machine's dead workers back to the pool (logged, never fatal)."""
    try:
        jobs = rescue_dead_neighbours(url)
    except Exception as err:  # Redis not up yet, say: RQ's heartbeat path still redoes them
        say("worker.rescue_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
        return
    if jobs:
        say("worker.jobs_abandoned", reason="dead_before_start", jobs=",".join(jobs))


def main(argv: list[str] | None = None) -> int:
    """Run the command in N processes (--processes N, default 1), each restarted whenever it
    exits, until we are told to stop."""
    command = list(sys.argv[1:] if argv is None else argv)
    processes = 1
    if command[:1] == ["--processes"] and len(command) > 1 and command[1].isdigit():
        processes, command = max(1, int(command[1])), command[2:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m workers.supervise [--processes N] rq worker [options] QUEUE…", file=sys.stderr)
        return 2
    url = os.environ.get("QUEUE_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    stopping = threading.Event()
    slots = [Slot(command, url, stopping) for _ in range(processes)]

    def stop(signum: int, _frame: object) -> None:
        stopping.set()
        for slot in slots:
            slot.signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if slots[0].named:
        rescue_at_start(url)
    for slot in slots:
        slot.start()
    while any(slot.is_alive() for slot in slots):
        for slot in slots:
            slot.join(0.5)
    codes = [slot.code for slot in slots]
    return max((c for c in codes if c >= 0), default=0)


if __name__ == "__main__":
    raise SystemExit(main())
