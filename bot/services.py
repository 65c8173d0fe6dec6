"""Build the bot's collaborators once, from settings; the app, CLI and jobs share this.

This is the one place that knows every layer: it connects Redis, builds the stores, the
queue and the model client, and puts the message path's steps in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import redis
import structlog
from redis.cluster import RedisCluster

from bot.config import DEFAULT_PROMPTS_DIR, MODEL_DEADLINE_S, PROMPT_FRAME_TOKENS, Settings
from bot.config.media import HTTP_MARGIN_S
from bot.config.media import MediaSettings
from bot.conversation.pipeline import Pipeline, Step
from bot.conversation.steps.activity import ActivityStep
from bot.conversation.steps.claim import ClaimStep
from bot.conversation.steps.command import CommandStep
from bot.conversation.steps.commit import CommitStep
from bot.conversation.steps.embed import EmbedStep
from bot.conversation.steps.entities import EntityMatchStep
from bot.conversation.steps.hand_off import HandOffStep
from bot.conversation.steps.handover import HandoverStep
from bot.conversation.steps.judge import JudgeStep
from bot.conversation.steps.knowledge import VERSION_FIELD, KnowledgeStep
from bot.conversation.steps.load_shed import LoadShedStep
from bot.conversation.steps.media import MediaSource, MediaStep
from bot.conversation.steps.memory import MemoryStep
from bot.conversation.steps.model import ModelStep
from bot.conversation.steps.prompt import PromptStep, system_with_knowledge
from bot.conversation.steps.rate_limit import RateLimitStep
from bot.conversation.steps.task import TaskStep
from bot.exceptions import ConfigError
from bot.jobs.queue import JobQueue
from bot.knowledge.library import Library
from bot.knowledge.retrieval import Retriever
from bot.llm.client import LLMClient, make_openai_client
from bot.llm.embeddings import Embedder, make_embedder
from bot.llm.prompts import Prompt, load_prompt
from bot.llm.tokens import TOKENS_PER_REPLY, TokenCounter
from bot.llm.transcription import Transcriber, make_transcription_client
from bot.memory.matching import EntityMatcher
from bot.memory.vectors import FactVectors
from bot.memory.names import entity_key
from bot.storage.activity import ActivityStore
from bot.storage.centers import CenterStore
from bot.storage.connection import QUEUE_REQUIRED, is_cluster, make_redis
from bot.storage.context import NO_BYTE_BOUND, ContextStore
from bot.storage.deferred import DeferredStore
from bot.storage.entities import EntityStore
from bot.storage.facts import FactStore
from bot.storage.handover import HandoverStore
from bot.storage.knowledge import KnowledgeStore
from bot.storage.keys import Ttls
from bot.storage.limits import RateCounter
from bot.storage.memory_meta import MemoryMetaStore
from bot.storage.redelivery import RedeliveryPolicy
from bot.storage.triggers import EXTRACTION, IDLE_SUMMARY, SummaryPolicy
from bot.storage.usage import UsageStore
from bot.storage.user_index import UserIndex
from bot.users.data import UserData

log = structlog.get_logger(__name__)

#: What a process is: each builds only what it uses (build_services).
Role = Literal["web", "worker", "cli"]

#: With the full-history baseline every pair stays "recent".
FULL_HISTORY_PAIRS = 1_000_000


@dataclass(frozen=True)
class Prompts:
    """The prompt files in use."""

    reply: Prompt
    summary: Prompt
    extraction: Prompt
    entities: Prompt
    task: Prompt
    knowledge: Prompt  # added to `reply` while the knowledge base holds documents


@dataclass
class Services:
    """The connections and domain objects one process uses."""

    settings: Settings
    redis: redis.Redis
    store: ContextStore
    facts: FactStore
    meta: MemoryMetaStore
    entities: EntityStore
    usage: UsageStore
    llm: LLMClient
    counter: TokenCounter
    prompts: Prompts
    jobs: JobQueue
    users: UserData
    handover: HandoverStore
    activity: ActivityStore
    knowledge: KnowledgeStore
    embedder: Embedder | None = None  # EMBEDDING_MODEL's client (None: off)
    deferred: DeferredStore | None = None  # the users' deferred messages (docs/deferred.md)
    # What a role builds besides (build_services): None where the process has no use for it.
    pipeline: Pipeline | None = None  # the web's message path
    deferred_pipeline: Pipeline | None = None  # the workers': the same steps, on DEFERRED_TURN_S
    library: Library | None = None  # adds and removes documents (web and CLI)
    retriever: Retriever | None = None  # searches them (the message path, previews)


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
) -> dict[str, Step | None]:
    """Return each step of the message path, by name, with its collaborators and its own
    settings; bot/conversation/pipeline.py puts them in order.

    Without memory (the full-history baseline) there are no facts, no task step and no
    background jobs. Without a media source (the CLI's services) attachments get the polite
    "couldn't download" reply. Without a handover store nobody can take a conversation over;
    without `activity` nothing is counted for the console. Without a retriever no knowledge
    base is searched; with one, the claim also reads the knowledge base's version.
    """
    facts = users.facts if with_memory else None
    jobs = users.jobs if with_memory else None
    worst = settings.redis_worst_s
    return {
        "claim": ClaimStep(users.store, settings.DEDUP_WAIT_S, worst, also=(VERSION_FIELD,) if retriever else ()),
        "command": CommandStep(users, memory_commands=with_memory, erase_confirm_s=settings.ERASE_CONFIRM_S,
                               reset_phrases=settings.RESET_PHRASES, topic_phrases=settings.TOPIC_SHIFT_PHRASES,
                               operators=settings.operators),
        "rate-limit": RateLimitStep(RateCounter(users.redis), settings.RATE_LIMIT_PER_MINUTE),
        "media": MediaStep(settings.slice(MediaSettings), media_source, transcriber, facts, counter,
                           redis_worst_s=worst, image_room=settings.MAX_PROMPT_TOKENS - PROMPT_FRAME_TOKENS
                           - settings.MEMORY_MAX_TOKENS, placeholders=settings.MEDIA_PLACEHOLDERS),
        "handover": HandoverStep(users, users.handover, settings.HANDOVER_NOTICE) if users.handover else None,
        "entities": EntityMatchStep(matcher if with_memory else None),
        "task": TaskStep(llm, task_prompt, on=settings.TASK_EXTRACTION == "on", model=settings.task_model,
                         deadline_s=settings.TASK_DEADLINE_S, check_entities=settings.ENTITY_TASK_CHECK)
        if task_prompt is not None and with_memory else None,
        "embed": EmbedStep(embedder, settings.EMBEDDING_DEADLINE_S),
        "knowledge": KnowledgeStep(retriever),
        "memory": MemoryStep(facts, counter, facts.vectors if facts is not None else None,
                             threshold=settings.EXTRACTION_CONFIDENCE, conflict_margin=settings.CONFLICT_MARGIN,
                             max_tokens=settings.MEMORY_MAX_TOKENS, related_weight=settings.ENTITY_RELATED_WEIGHT),
        "prompt": PromptStep(counter, system_prompt, knowledge_rules if retriever is not None else None,
                             unknown_reply=settings.KNOWLEDGE_UNKNOWN_REPLY, max_tokens=settings.MAX_PROMPT_TOKENS,
                             max_user_tokens=settings.MAX_USER_MESSAGE_TOKENS,
                             full_history=settings.CONTEXT_STRATEGY == "full_history"),
        "load-shed": LoadShedStep(settings.MODEL_CONCURRENCY),
        "model": ModelStep(llm, prompt_ref=system_prompt.ref, max_tokens=settings.REPLY_MAX_TOKENS,
                           vision_model=settings.vision_model, redis_worst_s=worst),
        "judge": JudgeStep(settings.MIN_PAIR_CHARS, settings.rephrase_phrases),
        "commit": CommitStep(users.store),
        "activity": ActivityStep(activity) if activity is not None else None,
        "hand-off": HandOffStep(users.store, jobs,
                                settings.EXTRACTION_MAX_PAIRS if settings.EXTRACTION_IDLE_S > 0 else 0),
    }


def check_frame(system_prompt: Prompt, counter: TokenCounter, knowledge: Prompt | None = None,
                unknown_reply: str = "") -> None:
    """Refuse to start when the system prompt (with the knowledge base's rules and
    KNOWLEDGE_UNKNOWN_REPLY) and the framing outgrow the room kept for them."""
    text = system_with_knowledge(system_prompt, knowledge, unknown_reply)
    frame = TOKENS_PER_REPLY + counter.message_cost("system", text) + counter.message_cost("user", "")
    if frame > PROMPT_FRAME_TOKENS:
        names = f"{system_prompt.name}.md" + (f" with {knowledge.name}.md and KNOWLEDGE_UNKNOWN_REPLY" if knowledge else "")
        raise ConfigError(
            f"PROMPTS_DIR: {names} takes {frame} tokens with its framing; the prompt "
            f"budget keeps {PROMPT_FRAME_TOKENS} for it (MAX_PROMPT_TOKENS minus the memory block "
            "and the message): shorten the prompt"
        )


def ttls_from(settings: Settings) -> Ttls:
    """Return the TTL rules (bot/storage/keys.py) in seconds."""
    return Ttls(
        context=settings.CONTEXT_TTL_DAYS * 86400,
        facts=settings.FACTS_TTL_DAYS * 86400,
        session=settings.SESSION_FACTS_TTL_HOURS * 3600,
    )


def redis_clients(settings: Settings, client: Any = None) -> tuple[Any, redis.Redis]:
    """Return the user-state client (`client` when given, else a RedisCluster when REDIS_URL
    is one) and the queue's (standalone, raw bytes for RQ's pickles). Raise ConfigError when a
    cluster has no QUEUE_REDIS_URL."""
    if client is None:
        cluster = settings.REDIS_CLUSTER
        if cluster is None:
            found = is_cluster(settings.REDIS_URL, timeout_s=settings.REDIS_TIMEOUT_S * 4)
            if found is None:
                log.warning("redis.cluster_unknown", detail="REDIS_URL did not answer; assuming a single "
                            "Redis (set REDIS_CLUSTER to skip asking)")
            cluster = bool(found)
        if cluster and not settings.QUEUE_REDIS_URL:
            raise ConfigError(QUEUE_REQUIRED)
        client = make_redis(settings.REDIS_URL, timeout_s=settings.REDIS_TIMEOUT_S, cluster=cluster)
    queue = make_redis(settings.queue_redis_url, decode_responses=False, timeout_s=settings.REDIS_TIMEOUT_S)
    return client, queue


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


def context_store(settings: Settings, client: redis.Redis, ttls: Ttls, full: bool) -> ContextStore:
    """Return the conversation store, with its users index (bucketed on a cluster)."""
    index = (UserIndex.for_cluster if isinstance(client, RedisCluster) else UserIndex)(client, keep_s=ttls.context)
    return ContextStore(
        client,
        recent_pairs=FULL_HISTORY_PAIRS if full else settings.RECENT_PAIRS,
        recent_bytes=NO_BYTE_BOUND if full else settings.RECENT_MAX_BYTES,
        redelivery=RedeliveryPolicy(
            window_s=settings.DEDUP_WINDOW_S,
            reply_s=settings.REDELIVERY_REPLY_S,
            max_records=settings.DEDUP_MAX_RECORDS,
        ),
        ttls=ttls,
        policy=SummaryPolicy(
            extract_every_n_pairs=0 if full else settings.EXTRACTION_INTERVAL,
            every_n_pairs=FULL_HISTORY_PAIRS if full else settings.SUMMARY_EVERY_N_PAIRS,
            soft_bytes=settings.PENDING_HURRY_BYTES,
            max_bytes=10**9 if full else settings.PENDING_MAX_BYTES,
            idle_summary=not full and settings.SUMMARY_IDLE_S > 0,
        ),
        index=index,
    )


def load_prompts(settings: Settings) -> Prompts:
    """Return the prompt files in use, from PROMPTS_DIR."""
    return Prompts(
        reply=load_prompt("reply_system", settings.PROMPTS_DIR),
        summary=load_prompt("summary", settings.PROMPTS_DIR),
        extraction=load_prompt("extract_facts", settings.PROMPTS_DIR),
        entities=load_prompt("extract_entities", settings.PROMPTS_DIR),
        task=load_prompt("extract_task", settings.PROMPTS_DIR),
        # a PROMPTS_DIR from before the knowledge base has no rules of its own: the shipped ones
        knowledge=load_prompt("reply_knowledge", settings.PROMPTS_DIR if (settings.PROMPTS_DIR / "reply_knowledge.md")
                              .is_file() else DEFAULT_PROMPTS_DIR),
    )


def build_services(
    settings: Settings, client: redis.Redis | None = None, media_source: MediaSource | None = None,
    role: Role = "web",
) -> Services:
    """Wire Redis, the stores, the queue and the model client, and what the process's role
    uses besides (docs/architecture.md): "web", the message path on the webhook's clock, the
    knowledge library and retriever; "worker", with deferred replies on, the message path on
    DEFERRED_TURN_S; "cli", the library and the retriever. media_source: where attachments
    come from (the channel's)."""
    client, queue_client = redis_clients(settings, client)
    full = settings.CONTEXT_STRATEGY == "full_history"
    ttls = ttls_from(settings)
    store = context_store(settings, client, ttls, full)
    index = store.index
    embedder = make_embedder(settings)
    fact_vectors = FactVectors(embedder, CenterStore(client)) if embedder is not None and not full else None
    facts = FactStore(client, facts_ttl_seconds=ttls.facts, session_ttl_seconds=ttls.session, vectors=fact_vectors)
    meta = MemoryMetaStore(client, ttl_seconds=ttls.facts)
    # RQ stores pickled payloads, so its connection must not decode responses.
    jobs = JobQueue(
        queue_client,
        settings.retry_intervals,
        settings.pseudonym_secret,
        delays={IDLE_SUMMARY: settings.SUMMARY_IDLE_S, EXTRACTION: settings.EXTRACTION_IDLE_S},
    )
    llm = LLMClient(
        make_openai_client(settings),
        settings.OPENAI_MODEL,
        timeout_s=settings.LLM_TIMEOUT_S,
        max_retries=settings.LLM_MAX_RETRIES,
        deadline_s=MODEL_DEADLINE_S,
    )
    counter = TokenCounter(settings.OPENAI_MODEL)
    prompts = load_prompts(settings)
    check_frame(prompts.reply, counter, prompts.knowledge, settings.KNOWLEDGE_UNKNOWN_REPLY)
    entities = EntityStore(client, entity_key, ttl_seconds=ttls.facts)
    activity = ActivityStore(client, keep_days=settings.ACTIVITY_KEEP_DAYS)
    usage = UsageStore(client, ttl_seconds=ttls.facts, activity=activity)
    handover = HandoverStore(client, ttl_seconds=settings.HANDOVER_TTL_HOURS * 3600, log_ttl_seconds=ttls.context)
    deferred = DeferredStore(client, settings.DEFERRED_TURN_S)
    users = UserData(client, store, facts, meta, jobs, entities, usage, handover, deferred, index)
    knowledge = KnowledgeStore(client)
    answers = role == "web" or (role == "worker" and settings.deferred_on)  # runs the message path
    retriever = Retriever(knowledge, counter, settings, embedder) if answers or role == "cli" else None
    services = Services(settings, client, store, facts, meta, entities, usage, llm, counter, prompts, jobs, users,
                        handover, activity, knowledge, embedder, deferred, retriever=retriever,
                        library=Library(knowledge, counter, settings, embedder) if role in ("web", "cli") else None)
    if role == "web":
        services.pipeline = message_path(services, media_source, full, settings.WEBHOOK_DEADLINE_S - HTTP_MARGIN_S)
    elif answers:
        services.deferred_pipeline = message_path(services, media_source, full, settings.DEFERRED_TURN_S)
    return services


def message_path(s: Services, media_source: MediaSource | None, full: bool, deadline_s: float) -> Pipeline:
    """Return the message path on this clock, with a speech client when media come in."""
    settings = s.settings
    matcher = EntityMatcher(s.entities, settings.ENTITY_FUZZY_THRESHOLD) if settings.ENTITIES_ENABLED else None
    # Only what fetches media builds a speech client: the web app, and the workers when replies
    # are deferred (workers/jobs.py).
    transcriber = make_transcriber(settings) if settings.VOICE and media_source is not None else None
    if media_source is not None:
        warn_media_room(settings)
    steps = build_steps(settings, s.users, s.llm, s.counter, s.prompts.reply, with_memory=not full, matcher=matcher,
                        task_prompt=s.prompts.task, media_source=media_source, transcriber=transcriber,
                        activity=s.activity, retriever=s.retriever, knowledge_rules=s.prompts.knowledge,
                        embedder=s.embedder)
    return Pipeline(steps, s.store, deadline_s=deadline_s)
