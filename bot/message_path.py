"""The message path, wired: every step with its collaborators and its own settings, in the
order bot/conversation/pipeline.py writes once (docs/architecture.md).

Only the processes that answer messages build it (bot/services.py `message_path`: the web,
and the workers when replies are deferred), so the CLI never imports the steps.
"""

from __future__ import annotations

import structlog

from bot.config import PROMPT_FRAME_TOKENS, Settings
from bot.config.media import MediaSettings
from bot.conversation.catalog import Catalog
from bot.conversation.pipeline import Step
from bot.conversation.steps.actions import ActionsStep
from bot.conversation.steps.activity import ActivityStep
from bot.conversation.steps.claim import ClaimStep
from bot.conversation.steps.command import CommandStep
from bot.conversation.steps.commit import CommitStep
from bot.conversation.steps.confirm import ConfirmStep
from bot.conversation.steps.embed import EmbedStep
from bot.conversation.steps.entities import EntityMatchStep
from bot.conversation.steps.hand_off import HandOffStep
from bot.conversation.steps.handover import HandoverStep
from bot.conversation.steps.judge import JudgeStep
from bot.conversation.steps.language import LanguageStep
from bot.conversation.steps.knowledge import VERSION_FIELD, KnowledgeStep
from bot.conversation.steps.load_shed import LoadShedStep
from bot.conversation.steps.media import MediaSource, MediaStep
from bot.conversation.steps.memory import MemoryStep
from bot.conversation.steps.model import ModelStep
from bot.conversation.steps.prompt import PromptStep
from bot.conversation.replies import shipped
from bot.conversation.steps.rate_limit import RateLimitStep
from bot.conversation.steps.task import TaskStep
from bot.conversation.tool_use import ToolUse
from bot.knowledge.retrieval import Retriever
from bot.llm.client import LLMClient
from bot.llm.embeddings import Embedder
from bot.llm.prompts import Prompt
from bot.llm.tokens import TokenCounter
from bot.llm.transcription import Transcriber, make_transcription_client
from bot.memory.matching import EntityMatcher
from bot.reminders.book import ReminderBook
from bot.storage.actions import ActionStore
from bot.storage.activity import ActivityStore
from bot.storage.limits import RateCounter
from bot.users.data import UserData

log = structlog.get_logger(__name__)


def build_steps(
    settings: Settings,
    users: UserData,
    llm: LLMClient,
    counter: TokenCounter,
    system_prompt: Prompt,
    with_memory: bool,
    matcher: EntityMatcher | None = None,
    task_prompt: Prompt | None = None,
    media_source: MediaSource | None = None,
    transcriber: Transcriber | None = None,
    activity: ActivityStore | None = None,
    retriever: Retriever | None = None,
    knowledge_rules: Prompt | None = None,
    embedder: Embedder | None = None,
    gate_embedder: Embedder | None = None,
    catalog: Catalog | None = None,
    preload_language: bool = True,
    tools: ToolUse | None = None,
    actions: ActionStore | None = None,
    reminders: ReminderBook | None = None,
) -> dict[str, Step | None]:
    """Return each step of the message path, by name, with its collaborators and its own
    settings; bot/conversation/pipeline.py puts them in order.

    Without memory (the full-history baseline) there are no facts, no task step and no
    background jobs. Without a media source (the CLI's services) attachments get the polite
    "couldn't download" reply. Without a handover store nobody can take a conversation over;
    without `activity` nothing is counted for the console. Without a retriever no knowledge
    base is searched; with one, the claim also reads the knowledge base's version. Without
    tools (TOOLS_OPENAPI unset) the model is asked once, and nothing is proposed or confirmed.
    """
    facts = users.facts if with_memory else None
    jobs = users.jobs if with_memory else None
    worst = settings.redis_worst_s
    words = catalog or shipped()
    return {
        "claim": ClaimStep(users.store, settings.DEDUP_WAIT_S, worst, also=(VERSION_FIELD,) if retriever else ()),
        "language": LanguageStep(words, settings.BOT_LANGUAGE, preload=preload_language),
        "command": CommandStep(users, with_memory, words, erase_confirm_s=settings.ERASE_CONFIRM_S,
                               reset_phrases=settings.RESET_PHRASES, topic_phrases=settings.TOPIC_SHIFT_PHRASES,
                               operators=settings.operators, reminders=reminders if settings.REMINDERS else None),
        "rate-limit": RateLimitStep(RateCounter(users.redis), settings.RATE_LIMIT_PER_MINUTE, words),
        "media": MediaStep(settings.slice(MediaSettings), media_source, transcriber, facts, counter, words,
                           redis_worst_s=worst, image_room=settings.MAX_PROMPT_TOKENS - PROMPT_FRAME_TOKENS
                           - settings.MEMORY_MAX_TOKENS, placeholders=settings.MEDIA_PLACEHOLDERS),
        "handover": HandoverStep(users, users.handover, words, settings.HANDOVER_NOTICE) if users.handover else None,
        "confirm": ConfirmStep(actions, tools.book, tools.caller, words, worst)
        if tools is not None and tools.book is not None and actions is not None else None,
        "entities": EntityMatchStep(matcher if with_memory else None),
        "task": TaskStep(llm, task_prompt, on=settings.TASK_EXTRACTION == "on", model=settings.task_model,
                         deadline_s=settings.TASK_DEADLINE_S, check_entities=settings.ENTITY_TASK_CHECK,
                         documents=retriever.languages if retriever is not None else None)
        if task_prompt is not None and with_memory else None,
        "embed": EmbedStep(embedder, settings.EMBEDDING_DEADLINE_S, gate_embedder if retriever is not None else None),
        "knowledge": KnowledgeStep(retriever),
        "memory": MemoryStep(facts, counter, facts.vectors if facts is not None else None,
                             threshold=settings.EXTRACTION_CONFIDENCE, conflict_margin=settings.CONFLICT_MARGIN,
                             max_tokens=settings.MEMORY_MAX_TOKENS, related_weight=settings.ENTITY_RELATED_WEIGHT),
        "prompt": PromptStep(counter, system_prompt, knowledge_rules if retriever is not None else None,
                             unknown_reply=settings.KNOWLEDGE_UNKNOWN_REPLY, max_tokens=settings.MAX_PROMPT_TOKENS,
                             max_user_tokens=settings.MAX_USER_MESSAGE_TOKENS,
                             full_history=settings.CONTEXT_STRATEGY == "full_history"),
        "load-shed": LoadShedStep(settings.MODEL_CONCURRENCY, words),
        "model": ModelStep(llm, prompt_ref=system_prompt.ref, max_tokens=settings.REPLY_MAX_TOKENS,
                           vision_model=settings.vision_model, redis_worst_s=worst,
                           tools=tools if actions is not None else None, catalog=words),
        "judge": JudgeStep(settings.MIN_PAIR_CHARS, settings.rephrase_phrases, words),
        "commit": CommitStep(users.store),
        "actions": ActionsStep(actions) if tools is not None and actions is not None else None,
        "activity": ActivityStep(activity) if activity is not None else None,
        "hand-off": HandOffStep(users.store, jobs,
                                settings.EXTRACTION_MAX_PAIRS if settings.EXTRACTION_IDLE_S > 0 else 0),
    }




def make_transcriber(settings: Settings) -> Transcriber:
    """Build the speech-to-text client: TRANSCRIPTION_BASE_URL's server if set, else the
    model's (OPENAI_BASE_URL)."""
    base_url = settings.TRANSCRIPTION_BASE_URL or settings.OPENAI_BASE_URL
    api_key = settings.TRANSCRIPTION_API_KEY or settings.openai_api_key
    timeout = settings.TRANSCRIPTION_TIMEOUT_S
    if not settings.deferred_on:  # every voice note is on the webhook's clock
        timeout = min(timeout, max(settings.media_room_s, 1.0))
    client = make_transcription_client(base_url, api_key, timeout)
    return Transcriber(client, settings.TRANSCRIPTION_MODEL, timeout_s=timeout)


def warn_media_room(settings: Settings) -> None:
    """Say at startup when the media timeouts are cut to fit the webhook's deadline."""
    room = settings.media_room_s
    if settings.DEFERRED_REPLIES and not settings.deferred_on:
        log.warning("deferred.off", detail="voice notes and photos must fit in the webhook's "
                    "WEBHOOK_DEADLINE_S: set TWILIO_ACCOUNT_SID so they are answered by a worker instead")
    for name in ("MEDIA_FETCH_TIMEOUT_S", "TRANSCRIPTION_TIMEOUT_S"):
        if name == "TRANSCRIPTION_TIMEOUT_S" and (settings.deferred_on or name not in settings.model_fields_set):
            continue  # deferred voice notes have all of it; the default is cut without a word (deferred.off says why)
        if getattr(settings, name) > room:
            log.warning("media.timeout_capped", setting=name, value=getattr(settings, name), room_s=round(room, 1),
                        detail="WEBHOOK_DEADLINE_S keeps room for Redis and the reply; the rest is all media gets")
