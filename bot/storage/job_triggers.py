"""Taking, handing on and freeing the triggers of background jobs (bot/storage/triggers.py),
for ContextStore: each job holds its trigger by token, so exactly one job runs per trigger."""

from __future__ import annotations

import time
import uuid

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import CONTEXT_PREFIX, MEMORY_PREFIX, PENDING_PREFIX, user_key
from bot.storage.records import text
from bot.storage.scripts import Scripts
from bot.storage.triggers import SummaryPolicy

#: The user hash each trigger rule names ("context" or "memory").
TRIGGER_HASHES = {"context": CONTEXT_PREFIX, "memory": MEMORY_PREFIX}


def new_token() -> str:
    """Return a short random token for claims and job triggers."""
    return uuid.uuid4().hex[:16]


class JobTriggers:
    """The trigger operations; the store using it provides redis, scripts and policy."""

    redis: redis.Redis
    scripts: Scripts
    policy: SummaryPolicy

    def _trigger_key(self, user: str, name: str) -> tuple[dict[str, str], str]:
        rule = self.policy.rule(name)
        return {"hash": user_key(TRIGGER_HASHES[rule.hash], user)}, rule.job

    def take_trigger(self, user: str, name: str, now: float | None = None) -> str:
        """Take a job's trigger now, whoever held it (a topic shift); return its token."""
        token = self._take(user, name, now, held=None)
        assert token is not None  # unconditional
        return token

    def renew_trigger(self, user: str, name: str, token: str, now: float | None = None) -> str | None:
        """Hand the trigger the job with `token` holds to a new token (its next look, queued
        for later); None when that job no longer holds it (erased, or taken over)."""
        return self._take(user, name, now, held=token)

    def take_free_trigger(self, user: str, name: str, now: float | None = None) -> str | None:
        """Take a job's trigger unless a job holds it inside the lease; return its token, or
        None (that job will see the new work itself, or its follow-up will)."""
        return self._take(user, name, now, held=None, lease=self.policy.job_lease_s)

    def _take(
        self, user: str, name: str, now: float | None, held: str | None, lease: int | None = None
    ) -> str | None:
        fresh = new_token()
        keys, job = self._trigger_key(user, name)
        args = {"job": job, "now": time.time() if now is None else now, "token": fresh, "held": held, "lease": lease}
        return fresh if self.scripts.run("take_trigger", keys, args) else None

    def release_trigger(self, user: str, name: str, token: str) -> bool:
        """Let the next pair trigger the job again, if the job with `token` still holds it."""
        keys, job = self._trigger_key(user, name)
        return bool(self.scripts.run("release_trigger", keys, {"job": job, "token": token}))

    def retrigger(self, user: str, name: str, now: float | None = None) -> str | None:
        """After a job of this kind ends: take its trigger again if pairs that came while it
        ran make it due; return the new job's token, or None."""
        token = new_token()
        taken = self.scripts.run(
            "retrigger",
            {
                "context": user_key(CONTEXT_PREFIX, user),
                "pending": user_key(PENDING_PREFIX, user),
                "memory": user_key(MEMORY_PREFIX, user),
            },
            {
                "rule": self.policy.rule(name).to_lua(token),
                "now": time.time() if now is None else now,
                "job_lease": self.policy.job_lease_s,
            },
        )
        return token if taken else None

    def trigger_tokens(self, user: str) -> dict[str, str]:
        """Return the token of each job trigger the user's hashes hold now (job kind -> token)."""
        rules = (*self.policy.triggers(), *self.policy.background_rules())
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for rule in rules:
                    pipe.hget(user_key(TRIGGER_HASHES[rule.hash], user), f"{rule.job}_token")
                values = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return {rule.name: text(v) for rule, v in zip(rules, values) if v}

