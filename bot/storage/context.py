"""Per-user conversation context: claim and commit a message, summaries, resets.

Keys (bot/storage/keys.py): ``chat_context:{+E164}`` hash with
``summary``; ``recent_messages`` (JSON list of the last RECENT_PAIRS valid pairs, within
RECENT_MAX_BYTES);
``message_count_since_summary``; ``last_interaction_timestamp`` (Unix seconds);
``seq`` (valid pairs ever stored; each pair carries its number ``n``);
``summarized_seq`` (the last pair number folded into the summary);
``summary_job_at`` / ``summary_job_token`` (the summary trigger, bot/storage/triggers.py);
``epoch`` (moves on at each reset, so nothing in flight from before a reset is stored
after it); ``last_task`` (the last resolved task, when task extraction is on);
``last_reference`` (the knowledge-base chunk ids and scores the last reply was given);
``reply_from`` (the number the user last wrote to, ``whatsapp:+…``: a person's reply in a
handover goes from it). ``chat_pending:{+E164}`` list: valid pairs not yet summarized that have already
left the recent window, oldest first; pending pairs = this list + the pairs of
``recent_messages`` numbered above ``summarized_seq``, so no pair is stored twice.

Why scripts and not a lock: each message costs two round trips (claim+load, commit) and
two messages from one user never lose or duplicate a pair, whatever thread or process
handles them. Two messages in flight at once are each answered from the context as it
stood when they arrived; their pairs are appended in the order they complete.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import (
    CONTEXT_PREFIX,
    ENTITIES_PREFIX,
    FACTS_PREFIX,
    MEMORY_PREFIX,
    PENDING_PREFIX,
    SEEN_PREFIX,
    SESSION_FACTS_PREFIX,
    USAGE_PREFIX,
    VECTORS_PREFIX,
    Ttls,
    user_key,
)
from bot.storage import packed_facts
from bot.storage.memory_meta import TASK_OFF_FIELD
from bot.storage.records import Pair, as_float, as_int, decode_pairs, flat_to_dict, text
from bot.storage.redelivery import INFLIGHT_LEASE_S, RedeliveryPolicy
from bot.storage.scripts import Scripts
from bot.storage.user_index import UserIndex
from bot.storage.job_triggers import JobTriggers, new_token
from bot.storage.triggers import EXTRACTION, SummaryPolicy

#: A recent window with no bound in bytes (the full-history baseline, tests of pair counts).
NO_BYTE_BOUND = 10**9

#: The user hashes a trigger can live in, by the name TriggerRule.hash uses.


@dataclass
class Context:
    """What the reply prompt is built from."""

    summary: str = ""
    recent: list[Pair] = field(default_factory=list)
    count_since_summary: int = 0
    last_interaction: float | None = None
    seq: int = 0
    summarized_seq: int = 0
    summary_job_at: float | None = None
    summary_job_token: str | None = None
    epoch: int = 0  # moves on at every reset
    last_task: str = ""  # the last resolved task (task extraction), for inspect
    last_reference: str = ""  # the knowledge-base chunks the last reply was given: "v12 faq#2:0.93 …" (ids, no text)
    reply_from: str = ""  # the number the user last wrote to ("whatsapp:+…"), to answer from
    language: str = ""  # the language the user last wrote in ("pt"), when a message told (docs/languages.md)

    def until_quiet(self, idle_s: float, now: float) -> float:
        """Return how much longer until the user has been quiet idle_s seconds (0: quiet now,
        or never heard from); a second's slack, so a job scheduled for that moment runs."""
        quiet = now - self.last_interaction if self.last_interaction is not None else idle_s
        return idle_s - quiet if quiet < idle_s - 1 else 0.0


@dataclass(frozen=True)
class Memory:
    """A user's stored facts and memory settings, as raw hash contents."""

    facts: dict[str, str] = field(default_factory=dict)
    session_facts: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    vectors: dict[str, str] = field(default_factory=dict)  # each fact's 1-bit vector, and "~m": the model

    @property
    def opted_out(self) -> bool:
        """Return whether the user asked not to be remembered."""
        return self.meta.get("opted_out") == "1"

    @property
    def task_off(self) -> bool:
        """Return whether the user turned the task call off (/task:off)."""
        return self.meta.get(TASK_OFF_FIELD) == "1"

    @property
    def erase_requested_at(self) -> float | None:
        """Return when the user asked to delete their data, if they did."""
        return as_float(self.meta.get("erase_requested_at"), "erase_requested_at")


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a MessageSid."""

    status: str  # "new", "duplicate" or "inflight"
    context: Context
    reply: str | None = None  # for duplicates inside the reply window: the reply already given
    memory: Memory = field(default_factory=Memory)
    token: str = ""  # proves, at commit, that this attempt still owns the MessageSid
    age_s: float | None = None  # duplicates and in-flight: seconds since the first attempt
    also: tuple[Any, ...] = ()  # the hash fields read beside the claim (claim's `also`), None if unread


@dataclass(frozen=True)
class CommitRecord:
    """What one processed message leaves behind: ContextStore.commit writes it whole."""

    user: str
    claim: Claim
    sid: str
    reply: str  # as sent, for a redelivery
    pair: Pair | None = None  # the valid exchange, if any
    touch_context: bool = True  # False right after an erase: nothing is written
    usage: dict[str, int] | None = None  # the turn's model calls (bot/storage/usage.py fields)
    last_task: str | None = None  # the resolved task, kept for inspect
    to: str = ""  # the number the user wrote to (reply_from)
    last_reference: str | None = None  # what the knowledge step found, for inspect
    language: str | None = None  # the language this message told, kept as the user's last (lang)


@dataclass(frozen=True)
class CommitResult:
    """What storing a message changed."""

    count_since_summary: int
    dropped: int  # pending pairs dropped unsummarized because the pending bound was hit
    seq: int = 0  # the number of the user's latest stored pair
    pair_stored: bool = False  # False if a reset or a takeover came between claim and commit
    due: dict[str, str] = field(default_factory=dict)  # job kind -> token of the trigger it took
    pending_bytes: int = 0  # what chat_pending holds after this commit (0 when it stored no pair)


@dataclass(frozen=True)
class Snapshot:
    """What a summary job works from."""

    summary: str
    pending: list[Pair]
    summarized_seq: int
    triggered_at: float | None = None  # when the summary was triggered (Unix seconds)
    epoch: int = 0
    token: str = ""  # the token of the job holding the trigger
    # Pairs numbered above this are still to be read by a queued fact extraction, so a
    # summary must not fold them away yet; None: nothing waits to read them.
    extraction_hold: int | None = None


def context_from_hash(data: dict[str, str]) -> Context:
    """Build a Context from the chat_context hash."""
    return Context(
        summary=data.get("summary", "") or "",
        recent=decode_pairs(data.get("recent_messages")),
        count_since_summary=as_int(data.get("message_count_since_summary"), "message_count_since_summary"),
        last_interaction=as_float(data.get("last_interaction_timestamp"), "last_interaction_timestamp"),
        seq=as_int(data.get("seq"), "seq"),
        summarized_seq=as_int(data.get("summarized_seq"), "summarized_seq"),
        summary_job_at=as_float(data.get("summary_job_at"), "summary_job_at"),
        summary_job_token=data.get("summary_job_token") or None,
        epoch=as_int(data.get("epoch"), "epoch"),
        last_task=data.get("last_task", "") or "",
        last_reference=data.get("last_reference", "") or "",
        reply_from=data.get("reply_from", "") or "",
        language=data.get("lang", "") or "",
    )


class ContextStore(JobTriggers):
    """Per-user conversation state in Redis, and the triggers of its background jobs."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        recent_pairs: int,
        recent_bytes: int = NO_BYTE_BOUND,
        redelivery: RedeliveryPolicy | None = None,
        ttls: Ttls | None = None,
        policy: SummaryPolicy | None = None,
        index: UserIndex | None = None,
    ) -> None:
        self.redis = client
        self.index = index  # the users by last activity, kept by the commit (bot/storage/user_index.py)
        self.recent_pairs = recent_pairs
        self.recent_bytes = recent_bytes
        self.redelivery = redelivery or RedeliveryPolicy()
        self.ttls = ttls or Ttls()
        self.policy = policy or SummaryPolicy()
        self.scripts = Scripts(
            client, "claim", "commit", "release", "snapshot", "apply_summary", "reset",
            "take_trigger", "release_trigger", "retrigger",
        )

    @staticmethod
    def _keys(user: str) -> dict[str, str]:
        """Return the user's keys by the names the scripts use."""
        return {
            "context": user_key(CONTEXT_PREFIX, user),
            "pending": user_key(PENDING_PREFIX, user),
            "seen": user_key(SEEN_PREFIX, user),
            "facts": user_key(FACTS_PREFIX, user),
            "session": user_key(SESSION_FACTS_PREFIX, user),
            "memory": user_key(MEMORY_PREFIX, user),
            "entities": user_key(ENTITIES_PREFIX, user),
            "usage": user_key(USAGE_PREFIX, user),
            "vectors": user_key(VECTORS_PREFIX, user),
        }

    def _pick(self, user: str, *names: str) -> dict[str, str]:
        keys = self._keys(user)
        return {name: keys[name] for name in names}

    # -- messages ----------------------------------------------------------------------
    def claim(self, user: str, sid: str, now: float | None = None, also: Sequence[tuple[str, str]] = (),
              token: str | None = None) -> Claim:
        """Claim a MessageSid for processing and load the user's context in one round trip;
        `also` names hash fields (key, field) read in that same round trip (the knowledge
        base's version), returned in Claim.also. A claim taken again with its own `token`
        is taken over at once, not reported in flight."""
        now = time.time() if now is None else now
        token = token or new_token()
        r = self.redelivery
        (status, flat, reply, facts, session, meta, age, vectors), extra = self.scripts.run_with_reads(
            "claim",
            self._pick(user, "context", "seen", "facts", "session", "memory", "vectors"),
            {
                "sid": sid,
                "now": now,
                "lease": INFLIGHT_LEASE_S,
                "token": token,
                "window": r.window_s,
                "reply_window": r.reply_s,
            },
            list(also),
        )
        facts, vectors = packed_facts.read_stored(facts, vectors)
        memory = Memory(facts, flat_to_dict(session), flat_to_dict(meta), vectors)
        age_s = float(text(age))  # -1 for a new claim
        return Claim(
            status=text(status),
            context=context_from_hash(flat_to_dict(flat)),
            reply=text(reply) if reply else None,
            memory=memory,
            token=token,
            age_s=None if age_s < 0 else age_s,
            also=tuple(text(v) for v in extra),
        )

    def commit(self, record: CommitRecord, now: float | None = None) -> CommitResult:
        """Record a processed message, storing its pair if valid and still wanted.

        The pair is dropped if a reset came after the claim, or if another attempt took the
        MessageSid over. With touch_context False (right after an erase) nothing is written.
        """
        claim, pair, index = record.claim, record.pair, self.index
        p = self.policy
        rules = p.triggers()
        tokens = {rule.name: new_token() for rule in rules}
        keys = self._keys(record.user)
        if index is not None and index.in_script:
            keys["index"] = index.key(record.user)
        when = time.time() if now is None else now
        count, dropped, seq, stored, taken, *written_and_bytes = self.scripts.run(
            "commit",
            keys,
            {
                "user": record.user,
                "sid": record.sid,
                "now": when,
                "token": claim.token,
                "epoch": claim.context.epoch,
                "reply": record.reply,
                "pair": pair.to_obj() if pair else None,
                "touch": record.touch_context,
                "recent_max": self.recent_pairs,
                "recent_bytes": self.recent_bytes,
                "pending_max": p.max_bytes,
                "job_lease": p.job_lease_s,
                "window": self.redelivery.window_s,
                "reply_window": self.redelivery.reply_s,
                "max_records": self.redelivery.max_records,
                "replies_kept": self.redelivery.replies_kept,
                "ttl": {"context": self.ttls.context, "facts": self.ttls.facts, "session": self.ttls.session},
                "triggers": [rule.to_lua(tokens[rule.name]) for rule in rules],
                "usage": record.usage or None,
                "last_task": record.last_task,
                "last_reference": record.last_reference,
                "to": record.to or None,
                "lang": record.language or None,
            },
        )
        written, pending_bytes = (written_and_bytes + [0, 0])[:2]  # early exits return neither
        if written and index is not None and not index.in_script:
            index.touch(record.user, when)  # a cluster: the index lives on other nodes
        return CommitResult(
            count_since_summary=int(count),
            dropped=int(dropped),
            seq=int(seq),
            pair_stored=bool(stored),
            due={text(name): tokens[text(name)] for name in taken},
            pending_bytes=int(pending_bytes) if stored else 0,
        )

    def release(self, user: str, claim: Claim, sid: str) -> None:
        """Forget our unfinished claim so that a redelivery is processed afresh."""
        self.scripts.run("release", self._pick(user, "seen"), {"sid": sid, "token": claim.token})

    # -- reading -----------------------------------------------------------------------
    def load(self, user: str) -> Context:
        """Return the user's context without claiming anything."""
        try:
            data = self.redis.hgetall(user_key(CONTEXT_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return context_from_hash({text(k): text(v) for k, v in data.items()})

    def snapshot(self, user: str, now: float | None = None) -> Snapshot:
        """Return the summary and every pending pair, oldest first, read atomically, with
        how far fact extraction has read if one of its jobs is on the way."""
        rule = self.policy.rule(EXTRACTION)
        summary, base, recent_raw, older, job_at, epoch, token, reader = self.scripts.run(
            "snapshot",
            self._pick(user, "context", "pending", "memory"),
            {"cursor": rule.cursor, "job": rule.job, "skip": rule.skip_field or "opted_out"},
        )
        base_seq = as_int(text(base), "summarized_seq")
        pending = [p for p in (Pair.from_json(item) for item in older) if p is not None]
        pending += [p for p in decode_pairs(text(recent_raw)) if p.n > base_seq]
        cursor, read_at, read_token, skip = (text(v) if v else "" for v in reader)
        now = time.time() if now is None else now
        reading = bool(read_token) and skip != "1" and rule.every > 0
        held_for = now - (as_float(read_at, f"{rule.job}_at") or 0.0)
        return Snapshot(
            summary=text(summary) or "",
            pending=pending,
            summarized_seq=base_seq,
            triggered_at=as_float(text(job_at), "summary_job_at"),
            epoch=as_int(text(epoch), "epoch"),
            token=text(token) or "",
            extraction_hold=as_int(cursor, rule.cursor) if reading and held_for <= self.policy.job_lease_s else None,
        )

    def pending_pairs(self, user: str) -> list[Pair]:
        """Return every valid pair not yet summarized, oldest first."""
        return self.snapshot(user).pending

    # -- summaries, job triggers and resets ---------------------------------------------
    def apply_summary(
        self, user: str, token: str, epoch: int, upto: int, summary: str, clear_upto: int | None = None
    ) -> tuple[bool, str]:
        """Store a summary of pairs up to `upto` if this job still holds the trigger and no
        reset came since; with `clear_upto` (a topic shift), pairs up to it also leave the
        recent window (those not folded in wait in chat_pending). Return (applied, reason)."""
        applied, _count, reason = self.scripts.run(
            "apply_summary",
            self._pick(user, "context", "pending"),
            {
                "token": token,
                "epoch": epoch,
                "upto": upto,
                "summary": summary,
                "clear_upto": clear_upto,
                "ttl": self.ttls.context,
            },
        )
        return bool(applied), text(reason)

    def reset(self, user: str) -> bool:
        """Clear summary, recent and pending pairs and the counter; return whether any existed."""
        keys = self._pick(user, "context", "pending", "session")
        return bool(self.scripts.run("reset", keys, {"ttl": self.ttls.context}))

    def ping(self) -> bool:
        """Return whether Redis answers."""
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False
