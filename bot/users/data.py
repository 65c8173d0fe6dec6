"""The stores that hold one user's data, handed together to the operations on it."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from bot.jobs.queue import JobQueue
from bot.storage.actions import ActionStore
from bot.storage.context import ContextStore
from bot.storage.deferred import DeferredStore
from bot.storage.entities import EntityStore
from bot.storage.usage import UsageStore
from bot.storage.facts import FactStore
from bot.storage.handover import HandoverStore
from bot.storage.memory_meta import MemoryMetaStore
from bot.storage.user_index import UserIndex
from bot.storage.outbox import OutboxStore
from bot.storage.reminders import ReminderStore
from bot.storage.window import WindowStore


@dataclass
class UserData:
    """Where a user's conversation, facts, entities, memory settings, background jobs,
    handover and deferred messages live."""

    redis: redis.Redis
    store: ContextStore
    facts: FactStore
    meta: MemoryMetaStore
    jobs: JobQueue | None = None
    entities: EntityStore | None = None
    usage: UsageStore | None = None
    handover: HandoverStore | None = None
    deferred: DeferredStore | None = None  # messages a worker is answering (docs/deferred.md)
    index: UserIndex | None = None  # the users by last activity (the console's list)
    actions: ActionStore | None = None  # a write waiting for the user's yes, and their tool calls (docs/tools.md)
    window: WindowStore | None = None  # WhatsApp's 24-hour window, and what is held outside it (docs/window.md)
    outbox: OutboxStore | None = None  # messages sent by API lately, and the deliveries that failed
    reminders: ReminderStore | None = None  # the user's reminders (docs/reminders.md)
