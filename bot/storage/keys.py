"""Every Redis key the bot uses, and how long each lives: one table, read by everything else.

Per user, the E.164 number sits inside braces (a Redis Cluster hash tag), so all of one
user's keys share a slot and the multi-key scripts stay cluster-safe. The hash fields of
each key are documented where they are written (the modules beside this one, and the
header comment of each Lua script), and in README's key table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeySpec:
    """One kind of key: its prefix, Redis type, what it holds and which TTL rule it follows."""

    prefix: str
    kind: str
    holds: str
    ttl: str  # the TTL rule's name in TTL_RULES


CONTEXT = KeySpec("chat_context:", "hash", "summary, recent pairs, counters, job triggers, epoch", "context")
PENDING = KeySpec("chat_pending:", "list", "unsummarized pairs that left the recent window", "context")
SEEN = KeySpec("chat_seen:", "hash", "MessageSid -> processing record, for redeliveries", "redelivery")
FACTS = KeySpec("user_facts:", "string", "durable facts and their vectors, packed (bot/storage/packed_facts.py)", "facts")
SESSION_FACTS = KeySpec("session_facts:", "hash", "facts true only for now", "session")
MEMORY = KeySpec("user_memory:", "hash", "opt-out, extraction progress and trigger, stats", "facts")
ENTITIES = KeySpec("user_entities:", "string", "named entities in the facts, and which facts pass 2 read", "facts")
USAGE = KeySpec("user_usage:", "hash", "model tokens by purpose and model", "facts")
VECTORS = KeySpec("user_vectors:", "hash", "fact vectors of a user stored before the packed facts; gone at their next write", "facts")
RATE = KeySpec("chat_rate:", "string", "messages in the current rate-limit window", "rate")
HANDOVER = KeySpec("chat_handover:", "hash", "a person has taken the conversation over: by whom, since when", "handover")
HANDOVER_LOG = KeySpec(
    "chat_handover_log:", "list", "what the user and the person said during a handover, until it is folded into pairs",
    "context",
)

DEFERRED = KeySpec("chat_deferred:", "list", "messages a worker answers (docs/deferred.md), oldest first", "deferred")
DEFERRED_RUN = KeySpec("chat_deferred_run:", "string", "the token of the job answering the deferred messages", "deferred")

ACTION = KeySpec("chat_action:", "hash", "the write the bot proposed, waiting for the user's yes (docs/tools.md)", "action")
TOOL_LOG = KeySpec("chat_tool_log:", "list", "the user's last tool calls: tool, outcome, status, when (never the API's answer)",
                   "context")
WINDOW = KeySpec("chat_window:", "string", "when the user last wrote (Unix seconds): WhatsApp's 24-hour window is open "
                 "while it lives (docs/window.md)", "window")
HELD = KeySpec("chat_held:", "list", "messages for the user held until they write again (outside the window), oldest first",
               "context")
OUTBOX = KeySpec("chat_outbox:", "hash", "messages sent by API lately, by Twilio's sid, until their delivery is known",
                 "window")
FAILED = KeySpec("chat_failed:", "list", "deliveries that failed (Twilio's error code), newest first", "context")
REMINDERS = KeySpec("chat_reminders:", "hash", "the user's reminders: id -> text, when, time zone, status (docs/reminders.md)",
                    "reminders")
#: Every per-user key, for inspection, export and erasure.
USER_KEYS = (CONTEXT, PENDING, SEEN, FACTS, SESSION_FACTS, MEMORY, ENTITIES, USAGE, RATE, HANDOVER, HANDOVER_LOG,
             VECTORS, DEFERRED, DEFERRED_RUN, ACTION, TOOL_LOG, WINDOW, HELD, OUTBOX, FAILED, REMINDERS)

#: TTL rules: each names the setting that sets it. Every per-user write refreshes the TTL
#: of the keys it touches, so a user's data expires that long after their last message.
TTL_RULES = {
    "context": "CONTEXT_TTL_DAYS",
    "redelivery": "DEDUP_WINDOW_S",
    "facts": "FACTS_TTL_DAYS",
    "session": "SESSION_FACTS_TTL_HOURS",
    "rate": "RATE_LIMIT_PER_MINUTE",  # the window: one minute from the user's first message in it
    "handover": "HANDOVER_TTL_HOURS",  # from the takeover: the bot answers again after it
    "signin": "CONSOLE_SIGNIN_WINDOW_S",  # failed sign-ins are counted over this window
    "activity": "ACTIVITY_KEEP_DAYS",  # hourly and daily counters of the console's overview
    "deferred": "DEFERRED_TURN_S",  # a runner's hold: two turns; the queue: ten, from the last change
    "action": "TOOLS_CONFIRM_TTL_S",  # from the proposal: an answer after it proposes nothing
    "window": "WHATSAPP_WINDOW_S",  # from the user's last message: WhatsApp's window closes with it
    "reminders": "REMINDERS_KEEP_DAYS",  # past the last reminder's time: a sent one is kept that long
}

#: Shared facts an operator maintains (business hours…); one hash for the whole bot, no TTL.
ORG_FACTS_KEY = "org_facts"
#: The console's operator accounts: name -> {hash (werkzeug scrypt), created_at, created_by}; no TTL.
OPERATORS_KEY = "console_operators"
#: Failed console sign-ins per operator name and client address (string counter; TTL rule "signin").
SIGNIN_PREFIX = "console_signin:"
#: Messages answered per hour, `activity:answered:<YYYYMMDDHH>` (string counter), model usage
#: per day, `activity:usage:<YYYYMMDD>` (hash, the fields of user_usage), and failed deliveries
#: per hour, `activity:failed:<YYYYMMDDHH>` (hash, Twilio's error code -> count); TTL rule "activity".
ACTIVITY_PREFIX = "activity:"

#: Users by last activity (bot/storage/user_index.py): sorted set, member the user's +E164,
#: score the last interaction; one key on a single Redis, USER_INDEX_BUCKETS keys
#: "user_index:{<n>}" on a cluster. No TTL: members older than the context's TTL are pruned.
USER_INDEX_KEY = "user_index"
#: Buckets of the users index on a Redis Cluster, so no one node holds every user.
USER_INDEX_BUCKETS = 16

#: Reminders by when they are due (bot/storage/reminders.py): sorted set, member
#: "<+E164>|<reminder id>", score the Unix time it is due; one key, no TTL (a member leaves
#: when its reminder is sent, cancelled or erased). The workers' sweep reads it for a
#: reminder whose scheduled job was lost.
REMINDERS_DUE_KEY = "reminders_due"

#: The middle of an embedding model's space (bot/memory/vectors.py): "embedding_center:<model>"
#: -> base64 float32, the mean of its vectors of bot/llm/anchors.py; no TTL, one per model.
CENTER_PREFIX = "embedding_center:"

#: The knowledge base (bot/storage/knowledge.py): four keys sharing the hash tag {kb}, so
#: the scripts that change them stay atomic on a Redis Cluster. No TTL: they live until an
#: operator removes a document; a user's reset or erase never touches them.
KB_TAG = "{kb}"
#: hash: version (moves on with every change), chunks, bytes (the totals the caps check).
KB_META_KEY = f"knowledge:{KB_TAG}:meta"
#: hash: document id -> record JSON (title, source, kind, language, sha256, chunks, bytes…).
KB_DOCS_KEY = f"knowledge:{KB_TAG}:docs"
#: hash: "<document id>#<n>" -> chunk JSON {"t": text, "k": tokens}.
KB_CHUNKS_KEY = f"knowledge:{KB_TAG}:chunks"
#: hash: "<document id>#<n>" -> "<model>|<base64 float32>": the chunk's embedding and its model.
KB_VECTORS_KEY = f"knowledge:{KB_TAG}:vectors"
#: ...and "~anchor#<n>" -> the same, for the dense gate's baseline passages (bot/llm/anchors.py).
KB_ANCHOR_PREFIX = "~anchor#"
#: hash: site id -> record JSON (the business's website as a source: its start URL, its pages
#: with their documents and validators, the last sync and its errors; bot/storage/sites.py).
KB_SITES_KEY = f"knowledge:{KB_TAG}:sites"
#: string, with a TTL: held while a sync runs (one at a time), and while the next one is
#: scheduled (one scheduled at a time).
KB_SYNC_LOCK_KEY = f"knowledge:{KB_TAG}:sync_lock"
KB_SYNC_NEXT_KEY = f"knowledge:{KB_TAG}:sync_next"
KB_KEYS = (KB_META_KEY, KB_DOCS_KEY, KB_CHUNKS_KEY, KB_VECTORS_KEY)

# The prefixes by name, for the code that builds one key at a time.
CONTEXT_PREFIX = CONTEXT.prefix
PENDING_PREFIX = PENDING.prefix
SEEN_PREFIX = SEEN.prefix
FACTS_PREFIX = FACTS.prefix
SESSION_FACTS_PREFIX = SESSION_FACTS.prefix
MEMORY_PREFIX = MEMORY.prefix
ENTITIES_PREFIX = ENTITIES.prefix
USAGE_PREFIX = USAGE.prefix
VECTORS_PREFIX = VECTORS.prefix
RATE_PREFIX = RATE.prefix
HANDOVER_PREFIX = HANDOVER.prefix
HANDOVER_LOG_PREFIX = HANDOVER_LOG.prefix
DEFERRED_PREFIX = DEFERRED.prefix
DEFERRED_RUN_PREFIX = DEFERRED_RUN.prefix
ACTION_PREFIX = ACTION.prefix
TOOL_LOG_PREFIX = TOOL_LOG.prefix
WINDOW_PREFIX = WINDOW.prefix
HELD_PREFIX = HELD.prefix
OUTBOX_PREFIX = OUTBOX.prefix
FAILED_PREFIX = FAILED.prefix
REMINDERS_PREFIX = REMINDERS.prefix
USER_KEY_PREFIXES = tuple(spec.prefix for spec in USER_KEYS)


def user_key(prefix: str, user: str) -> str:
    """Return the key for one user, with the number as a cluster hash tag."""
    return f"{prefix}{{{user}}}"


def user_keys(user: str) -> list[str]:
    """Return every key that may hold this user's data."""
    return [user_key(prefix, user) for prefix in USER_KEY_PREFIXES]


@dataclass(frozen=True)
class Ttls:
    """The TTL rules in seconds (0: no expiry), from settings."""

    context: int = 0
    facts: int = 0
    session: int = 86400
