"""Enqueue background jobs on RQ; the job functions themselves live in workers/.

Each job kind (the names of bot/storage/triggers.py) is one entry in JOB_KINDS: its queue,
its function, its failure callback and its id prefix. Job ids are `<prefix>-<tag>-<token>`:
the token of the trigger the job holds, and a keyed pseudonym of the user (HMAC-SHA256 with
PSEUDONYM_SECRET, so nobody can reverse it by hashing every number of a country), so RQ's own
logs carry no phone numbers and erasing a user finds their jobs without scanning the keyspace.
Finished jobs keep no result (nothing reads one), so their records, and the number in their
arguments, go as soon as they succeed.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from rq import Callback, Queue, Retry
from rq.job import Job, NoSuchJobError

from bot.storage.triggers import ENTITIES, EXTRACTION, IDLE_SUMMARY, SUMMARY

SUMMARY_QUEUE = "summaries"
FACTS_QUEUE = "facts"
#: Deferred replies (docs/deferred.md): a user waits on them, so workers take this queue first.
REPLIES_QUEUE = "replies"
#: The job kind that answers a user's deferred messages (not a trigger: its hold is
#: bot/storage/deferred.py's).
DEFERRED_REPLY = "deferred_reply"
#: The job kind that sends one reminder at its time (docs/reminders.md); its token is the
#: reminder's id.
REMINDER = "reminder"

#: One model request per job; a minute covers the slowest with its own timeout inside.
JOB_TIMEOUT_S = 60
#: Failed jobs stay inspectable in RQ's failed registry for a week.
FAILED_TTL_S = 7 * 86400
#: Set (in the queue's Redis) when a job failed because the model did: the next job whose
#: model call succeeds takes it and runs every job waiting for a retry at once.
OUTAGE_KEY = "bot:model_outage"
OUTAGE_TTL_S = 3600
#: While an outage is noted, an idle worker asks the model a one-token question this often
#: (one worker for the whole pool), so a recovered model is seen within seconds.
PROBE_LOCK_KEY = "bot:model_probe"
PROBE_EVERY_S = 5


@dataclass(frozen=True)
class JobKind:
    """How one kind of background job is queued."""

    queue: str
    func: str
    on_failure: str
    id_prefix: str


JOB_KINDS = {
    SUMMARY: JobKind(SUMMARY_QUEUE, "workers.jobs.summarize_user", "workers.jobs.summary_failed", "summary"),
    EXTRACTION: JobKind(FACTS_QUEUE, "workers.jobs.extract_user_facts", "workers.jobs.extraction_failed", "facts"),
    IDLE_SUMMARY: JobKind(SUMMARY_QUEUE, "workers.jobs.summarize_when_idle", "workers.jobs.idle_summary_failed", "idle"),
    ENTITIES: JobKind(FACTS_QUEUE, "workers.jobs.extract_user_entities", "workers.jobs.entities_failed", "entities"),
    DEFERRED_REPLY: JobKind(REPLIES_QUEUE, "workers.jobs.answer_deferred", "workers.jobs.deferred_failed", "reply"),
    REMINDER: JobKind(REPLIES_QUEUE, "workers.jobs.send_reminder", "workers.jobs.reminder_failed", "remind"),
}


class JobQueue:
    """Hand slow work to the RQ workers."""

    def __init__(
        self,
        connection: redis.Redis,
        retry_intervals: list[int],
        pseudonym_key: str,
        delays: dict[str, float] | None = None,
    ) -> None:
        self.connection = connection
        self.queues = {name: Queue(name, connection=connection) for name in {k.queue for k in JOB_KINDS.values()}}
        self.retry_intervals = retry_intervals
        self._key = pseudonym_key.encode()
        self.delays = delays or {}  # job kind -> seconds its job waits before it runs

    def tag(self, user: str) -> str:
        """Return the user's pseudonym in job ids: keyed, so it cannot be reversed by trial."""
        return hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()[:16]

    def job_id(self, kind: str, user: str, token: str) -> str:
        """Return the id of the job of this kind that holds trigger `token`."""
        return f"{JOB_KINDS[kind].id_prefix}-{self.tag(user)}-{token}"

    @property
    def summaries(self) -> Queue:
        """The queue summary jobs wait in."""
        return self.queues[SUMMARY_QUEUE]

    def enqueue(self, kind: str, user: str, token: str, delay_s: float | None = None, timeout_s: int | None = None,
                **kwargs: Any) -> str:
        """Queue the user's job of this kind for trigger `token`, with our retry, timeout (or
        `timeout_s`) and failure-callback policy, to run now or after its kind's delay (or
        `delay_s`); return its id. A delayed job waits in RQ's scheduled registry (the
        worker's scheduler)."""
        spec = JOB_KINDS[kind]
        ident = self.job_id(kind, user, token)
        options: dict[str, Any] = {
            "job_id": ident,
            "retry": Retry(max=len(self.retry_intervals), interval=self.retry_intervals),
            "on_failure": Callback(spec.on_failure),
            "result_ttl": 0,  # nothing reads a result: the record goes when the job succeeds
            "failure_ttl": FAILED_TTL_S,
            "description": ident.rsplit("-", 1)[0],
        }
        queue = self.queues[spec.queue]
        delay = self.delays.get(kind, 0) if delay_s is None else delay_s
        if delay > 0:
            if kwargs:
                raise ValueError("a delayed job takes only the user and its token")
            job = queue.enqueue_in(timedelta(seconds=delay), spec.func, user, token,
                                   job_timeout=timeout_s or JOB_TIMEOUT_S, **options)
        else:
            job = queue.enqueue_call(spec.func, args=(user, token), kwargs=kwargs, timeout=timeout_s or JOB_TIMEOUT_S,
                                     **options)
        return job.id

    def job_status(self, ident: str) -> str | None:
        """Return a job's status (queued, started, scheduled, failed, finished), if it exists."""
        try:
            job = Job.fetch(ident, connection=self.connection)
        except NoSuchJobError:
            return None
        status = job.get_status(refresh=False)
        return status.value if status is not None else None

    def waiting_for_delay(self, ident: str) -> bool:
        """Return whether a job is scheduled for its kind's delay (not waiting between the
        retries of a failure, which must run their course)."""
        try:
            job = Job.fetch(ident, connection=self.connection)
        except NoSuchJobError:
            return False
        status = job.get_status(refresh=False)
        return status is not None and status.value == "scheduled" and job.retries_left == len(self.retry_intervals)

    def reschedule(self, kind: str, user: str, token: str, now: bool = False) -> bool:
        """Move the user's job of this kind, if it waits in RQ's scheduled registry: to its
        kind's full delay from now (only ever later: the user wrote again, so the job need not
        wake up only to find them still writing), or, with `now`, to now (only ever sooner).
        One command; False when no such job waits (it runs, or none is queued)."""
        delay = 0.0 if now else self.delays.get(kind, 0)
        if delay <= 0 and not now:
            return False
        registry = self.queues[JOB_KINDS[kind].queue].scheduled_job_registry
        at = int(time.time() + delay)  # whole seconds, as RQ's own ScheduledJobRegistry.schedule writes them
        return bool(self.connection.zadd(registry.key, {self.job_id(kind, user, token): at},
                                         xx=True, gt=not now, lt=now, ch=True))

    def note_outage(self) -> None:
        """Remember that a job failed on the model (its retry waits out the backoff)."""
        self.connection.set(OUTAGE_KEY, "1", ex=OUTAGE_TTL_S)

    def outage_noted(self) -> bool:
        """Return whether jobs wait out a retry because the model failed them, and this
        process may probe it now (at most one probe per PROBE_EVERY_S across the pool)."""
        if not self.connection.exists(OUTAGE_KEY):
            return False
        return bool(self.connection.set(PROBE_LOCK_KEY, "1", nx=True, ex=PROBE_EVERY_S))

    def after_model_success(self) -> int:
        """A job's model call succeeded: if an outage was noted, the model is back, so run
        every job waiting for a retry now rather than at the end of its backoff; return how
        many. One Redis command when there was no outage."""
        if self.connection.getdel(OUTAGE_KEY) is None:
            return 0
        hurried = 0
        for queue in self.queues.values():
            registry = queue.scheduled_job_registry
            for ident in registry.get_job_ids():
                try:
                    job = Job.fetch(ident, connection=self.connection)
                except NoSuchJobError:
                    continue
                if job.retries_left is None or job.retries_left >= len(self.retry_intervals):
                    continue  # waiting for its kind's delay (the user's pause), not for a retry
                registry.remove(job)
                queue.enqueue_job(job)
                hurried += 1
        return hurried

    def delete(self, ident: str) -> bool:
        """Delete one job (waiting, scheduled or failed) by id; return whether it existed."""
        try:
            Job.fetch(ident, connection=self.connection).delete(remove_from_queue=True)
        except NoSuchJobError:
            return False
        return True

    def failed_summaries(self, user: str) -> list[str]:
        """Return the ids of this user's summary jobs in RQ's failed registry."""
        prefix = f"{JOB_KINDS[SUMMARY].id_prefix}-{self.tag(user)}-"
        return [j for j in self.summaries.failed_job_registry.get_job_ids() if j.startswith(prefix)]

    def user_job_ids(self, user: str, tokens: dict[str, str]) -> set[str]:
        """Return the ids of every job of this user: those of the triggers they hold now
        (`tokens`, job kind -> token) and any other still queued, scheduled, running or failed.

        Reads the queues and RQ's registries (bounded by the backlog), never the keyspace.
        """
        ids = {self.job_id(kind, user, token) for kind, token in tokens.items() if token}
        prefixes = tuple(f"{kind.id_prefix}-{self.tag(user)}-" for kind in JOB_KINDS.values())
        for queue in self.queues.values():
            registries = (
                queue.scheduled_job_registry,
                queue.started_job_registry,
                queue.deferred_job_registry,
                queue.failed_job_registry,
            )
            for ident in [*queue.get_job_ids(), *(i for r in registries for i in r.get_job_ids())]:
                if ident.startswith(prefixes):
                    ids.add(ident)
        return ids

    def purge_user(self, user: str, tokens: dict[str, str]) -> int:
        """Delete every job of this user (their arguments hold the number); return how many."""
        return sum(self.delete(ident) for ident in self.user_job_ids(user, tokens))

    def depth(self) -> dict[str, int]:
        """Return jobs waiting and failed per queue."""
        out = {}
        for name in (REPLIES_QUEUE, SUMMARY_QUEUE, FACTS_QUEUE):
            out[name] = self.queues[name].count
            out[f"{name}_failed"] = self.queues[name].failed_job_registry.count
        return out
