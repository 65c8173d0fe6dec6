"""The one rule by which a stored pair makes a background job due, and the table of jobs.

Each job keeps, in one of the user's hashes, a cursor (the last pair number it has read)
and a trigger (`<job>_at`, `<job>_token`: which job holds it, since when). The commit script
(lua/commit.lua) applies the same rule to every entry: due once `every` pairs are unread,
or early once chat_pending passes `early_bytes`; taken only if no job holds the trigger
inside the lease, so exactly one job is queued per trigger. A new background job is one
more entry in `triggers()` (and its job in bot/jobs/queue.py), not a new branch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SUMMARY = "summary"
EXTRACTION = "extraction"
IDLE_SUMMARY = "idle_summary"
ENTITIES = "entities"
#: The trigger fields' prefixes (<job>_at, <job>_token), as they have always been named.
SUMMARY_JOB = "summary_job"
EXTRACTION_JOB = "extract_job"
IDLE_JOB = "idle_job"
ENTITY_JOB = "entity_job"


@dataclass(frozen=True)
class TriggerRule:
    """When one background job is due, and where its cursor and trigger are kept."""

    name: str  # the job kind, as bot/jobs/queue.py knows it
    hash: str  # the user key holding cursor and trigger: "context" or "memory" (commit.lua KEYS)
    cursor: str  # hash field: the last pair number the job has read
    job: str  # hash field prefix: <job>_at and <job>_token hold the trigger
    every: int  # due once this many pairs are unread (0: never by count)
    early_bytes: int = 0  # also due once chat_pending holds this many bytes (0: never)
    skip_field: str | None = None  # while this field is "1", pairs are never read: the cursor moves on

    def to_lua(self, token: str) -> dict[str, Any]:
        """Return the rule as commit.lua reads it, with the token a job taking it will hold."""
        return {**asdict(self), "token": token}


@dataclass(frozen=True)
class SummaryPolicy:
    """When the background jobs are due and how far pending pairs may grow without a summary."""

    every_n_pairs: int = 10
    # Pending pairs outside the recent window are summarized early past this many bytes (and
    # a waiting fact extraction runs now: bot/jobs/handoff.py)...
    soft_bytes: int = 1500
    # ...and the oldest are dropped past this: the last resort against a runaway client.
    max_bytes: int = 32000
    # A queued or running job holds the trigger this long; after it, the next pair re-triggers.
    job_lease_s: int = 900
    # Fact extraction after every this many valid pairs (0: never).
    extract_every_n_pairs: int = 1
    # Fold what left the recent window into the summary once the user is quiet (a delayed job).
    idle_summary: bool = True

    def triggers(self) -> tuple[TriggerRule, ...]:
        """Return the background jobs a stored pair can make due, in the order they are considered."""
        return (
            TriggerRule(SUMMARY, "context", "summarized_seq", SUMMARY_JOB, self.every_n_pairs, self.soft_bytes),
            TriggerRule(
                EXTRACTION, "memory", "extracted_seq", EXTRACTION_JOB, self.extract_every_n_pairs,
                skip_field="opted_out",
            ),
            # Due as soon as any pair waits outside the recent window; its job runs once the
            # user has been quiet for SUMMARY_IDLE_S (bot/jobs/queue.py delays it).
            TriggerRule(IDLE_SUMMARY, "context", "summarized_seq", IDLE_JOB, 0, 1 if self.idle_summary else 0),
        )

    def background_rules(self) -> tuple[TriggerRule, ...]:
        """Return the jobs no stored pair makes due, only another job: pass 2 of extraction,
        queued by a fact extraction that changed facts (its cursor is unused: it reads facts)."""
        return (TriggerRule(ENTITIES, "memory", "entities_version", ENTITY_JOB, 0),)

    def rule(self, name: str) -> TriggerRule:
        """Return the trigger rule of one job kind."""
        return next(rule for rule in (*self.triggers(), *self.background_rules()) if rule.name == name)
