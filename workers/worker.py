"""The RQ worker class the Procfile runs: RQ's forking Worker, warmed up once.

Each job runs in a forked child. Without warming, every child would build the model
client and load the tiktoken encoding afresh (about a second); built once in the parent,
the children inherit them. Redis connection pools reset themselves after a fork.
"""

from __future__ import annotations

from typing import Any

from rq.worker import Worker

from workers import jobs


class BotWorker(Worker):
    """RQ's Worker with the job collaborators built before the first fork, and quick recovery.

    - A lost connection while waiting for jobs is retried every 2 s at most (RQ backs off to
      60 s), so work resumes within seconds of Redis coming back.
    - A running job renews its heartbeat every `--job-monitoring-interval` seconds and counts
      as abandoned 3 intervals after the last one (at once when the supervisor saw its worker die), and every
      `--maintenance-interval` seconds a worker retries abandoned jobs, holding the same
      trigger token, so it is still done exactly once.
    - An idle worker wakes from waiting for work every maintenance interval, not every
      `worker_ttl - 15` s (405) as RQ's does: only then does it run maintenance, which also
      takes over the scheduler (delayed jobs, retries) when the worker that ran it died. With
      RQ's wait, a killed worker's job and every delayed job waited about seven minutes.
    """

    max_connection_wait_time = 2.0

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
        """RQ's maintenance, then, while jobs wait out a retry after a model outage, a
        one-token probe of the model: if it answers, those jobs run now (README, Context and
        summaries)."""
        super().run_maintenance_tasks()
        try:
            jobs.probe_model()
        except Exception as err:  # never the worker's death: the backoff still runs its course
            self.log.warning("model probe failed to run: %s", err)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        """Warm up, then work as RQ does."""
        jobs.services()
        return super().work(*args, **kwargs)
