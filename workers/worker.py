"""The RQ worker class the Procfile runs: RQ's forking Worker, warmed up once.

Each job runs in a forked child. Without warming, every child would build the model
client and load the tiktoken encoding afresh (about a second); built once in the parent,
the children inherit them. Redis connection pools reset themselves after a fork.
"""

from __future__ import annotations

import gc

from typing import Any

from rq.worker import Worker

from bot.llm.sdk import build_all
from workers import jobs
from workers.abandoned import may_redo, redo_abandoned, redo_now


class BotWorker(Worker):
    """RQ's Worker with the job collaborators built before the first fork, and quick recovery.

    - A lost connection while waiting for jobs is retried every 2 s at most (RQ backs off to
      60 s), so work resumes within seconds of Redis coming back.
    - A running job renews its heartbeat every `--job-monitoring-interval` seconds and counts
      as abandoned 3 intervals after the last one (at once when a supervisor saw its worker
      die), and every `--maintenance-interval` seconds a worker puts abandoned jobs back at the
      front of their queue, at once and without spending a retry (workers/abandoned.py); the
      job holds the same trigger token, so it is still done exactly once.
    - An idle worker wakes from waiting for work every maintenance interval, not every
      `worker_ttl - 15` s (405) as RQ's does: only then does it run maintenance, which also
      takes over the scheduler (delayed jobs, retries) when the worker that ran it died. With
      RQ's wait, a killed worker's job and every delayed job waited about seven minutes.
    """

    max_connection_wait_time = 2.0
    #: The job whose work horse died under it, by no hand of ours (the OOM killer, a crash).
    _horse_lost: str | None = None
    _killing_horse = False

    def get_heartbeat_ttl(self, job: Any, working_time: float = 0.0) -> int:
        """Return how long a running job's heartbeat lasts: 3 monitoring intervals."""
        interval = max(1, int(self.job_monitoring_interval))
        if job.timeout and job.timeout > 0:
            interval = max(1, min(interval, int(job.timeout - working_time)))
        return 3 * interval

    @property
    def dequeue_timeout(self) -> int:
        """Return how long an idle worker waits for a job before its maintenance comes round."""
        return max(1, min(int(self.worker_ttl) - 15, int(self.maintenance_interval)))

    def run_maintenance_tasks(self) -> None:
        """Redo the jobs of dead workers now; RQ's maintenance; then, while jobs wait out a
        retry after a model outage, a one-token probe of the model: if it answers, those jobs
        run now (docs/conversation.md); then queue any overdue reminder whose job was lost
        (docs/reminders.md)."""
        for queue in self.queues:
            try:
                redo_abandoned(queue)
            except Exception as err:  # RQ's own cleanup still retries them, after the backoff
                self.log.warning("redoing abandoned jobs failed: %s", err)
        super().run_maintenance_tasks()
        try:
            jobs.probe_model()
        except Exception as err:  # never the worker's death: the backoff still runs its course
            self.log.warning("model probe failed to run: %s", err)
        try:
            jobs.sweep_reminders()
        except Exception as err:  # the scheduled jobs still run; the next maintenance looks again
            self.log.warning("reminder sweep failed to run: %s", err)

    def kill_horse(self, *args: Any, **kwargs: Any) -> None:
        """Kill the work horse as RQ does, remembering that its death is ours (a job past its
        timeout, a cold shutdown): such a job is not redone at once."""
        self._killing_horse = True
        super().kill_horse(*args, **kwargs)

    def handle_work_horse_killed(self, job: Any, retpid: Any, ret_val: Any, rusage: Any) -> None:
        """Note a work horse that died under its job by no hand of ours."""
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        if not self._killing_horse:
            self._horse_lost = job.id
        self._killing_horse = False

    def handle_job_failure(self, job: Any, queue: Any, started_job_registry: Any = None, exc_string: str = "",
                           execution: Any = None) -> None:
        """A job whose work horse died is redone at once, at the front of its queue, without
        spending a retry (workers/abandoned.py); any other failure goes through RQ's retries."""
        lost, self._horse_lost = self._horse_lost == job.id, None
        if lost and may_redo(job):
            with self.connection.pipeline() as pipe:
                self.cleanup_execution(job, pipeline=pipe, execution=execution)
                pipe.execute()
            redo_now(queue, job, why="its work horse died")
            return
        super().handle_job_failure(job, queue, started_job_registry=started_job_registry, exc_string=exc_string,
                                   execution=execution)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        """Warm up (the collaborators, and the SDK clients: bot/llm/sdk.py), freeze what that
        loaded out of the collector's sight (docs/scaling.md, Pauses), then work as RQ does."""
        jobs.services()
        build_all()
        gc.freeze()
        return super().work(*args, **kwargs)
