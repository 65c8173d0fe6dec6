"""Operations on a user's entities, for the CLI and the admin API: what a text would recall,
and re-extraction when pass 2's prompt changed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import structlog

from bot.config import Settings
from bot.llm.client import LLMClient
from bot.llm.prompts import Prompt
from bot.memory.entity_extraction import EntityRules, read_entities, user_facts
from bot.memory.matching import EntityMatcher, Recall
from bot.storage.triggers import ENTITIES
from bot.users.data import UserData

log = structlog.get_logger(__name__)


def recall(data: UserData, settings: Settings, user: str, text: str) -> Recall:
    """Return the known entities `text` names, as the entities step would match them."""
    if data.entities is None or not settings.ENTITIES_ENABLED:
        return Recall([], {})
    return EntityMatcher(data.entities, settings.ENTITY_FUZZY_THRESHOLD).recall(user, text)


@dataclass
class ReextractReport:
    """What a re-extraction did."""

    users: int = 0
    rebuilt: int = 0
    up_to_date: int = 0  # nothing to read: done before (a resumed run skips them)
    skipped_opted_out: int = 0
    calls: int = 0
    failed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready data."""
        return {"users": self.users, "rebuilt": self.rebuilt, "up_to_date": self.up_to_date,
                "skipped_opted_out": self.skipped_opted_out, "model_calls": self.calls, "failed": self.failed}


def reextract(
    data: UserData,
    settings: Settings,
    llm: LLMClient,
    prompt: Prompt,
    users: Iterable[str],
    *,
    calls_per_minute: float,
    progress: Callable[[int, str], None] = lambda done, user: None,
    sleep: Callable[[float], None] = time.sleep,
) -> ReextractReport:
    """Rebuild the entities of each user from their stored facts with the current prompt,
    reading only facts whose stamp is not this prompt version's (so a run stopped halfway
    resumes where it was), at most `calls_per_minute` model calls. No conversation is read."""
    report = ReextractReport()
    gap = 60.0 / calls_per_minute if calls_per_minute > 0 else 0.0
    last_call = 0.0
    rules = EntityRules.from_settings(settings)
    assert data.entities is not None
    for done, user in enumerate(users, 1):
        report.users += 1
        if data.meta.meta(user).get("opted_out") == "1":
            report.skipped_opted_out += 1
            progress(done, user)
            continue
        changed, gone = data.entities.load(user).unread(user_facts(data.facts, user), prompt.version)
        if not changed and not gone:
            report.up_to_date += 1
            progress(done, user)
            continue
        while True:
            sleep(max(0.0, last_call + gap - time.monotonic()))
            last_call = time.monotonic()
            token = data.store.take_trigger(user, ENTITIES)  # a job queued meanwhile is superseded
            try:
                result = read_entities(user, token, data.facts, data.entities, llm, prompt,
                                       model=settings.entity_model, rules=rules)
            except Exception as err:  # the model or Redis: note it, go on with the next user
                data.store.release_trigger(user, ENTITIES, token)
                log.error("entities.reextract_failed", error=f"{type(err).__name__}: {err}")
                report.failed.append(user)
                break
            report.calls += 1 if result.read else 0
            if data.usage is not None:
                data.usage.count_call(user, "entities", result.completion)
            if result.status == "nothing_new":
                data.store.release_trigger(user, ENTITIES, token)
            if result.status != "stored" or not result.left:
                break
        if user not in report.failed:
            report.rebuilt += 1
        progress(done, user)
    return report
