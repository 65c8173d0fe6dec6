"""Build the bot's collaborators once, from settings; the app, CLI and jobs share this.

With bot/message_path.py (the steps, wired in order: built only where messages are
answered), this is the one place that knows every layer: it connects Redis, builds the
stores, the queue and the model clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import redis
import structlog
from redis.cluster import RedisCluster

from bot.config import DEFAULT_PROMPTS_DIR, MODEL_DEADLINE_S, PROMPT_FRAME_TOKENS, Settings
from bot.config.media import HTTP_MARGIN_S
from bot.conversation.catalog import Catalog, load_catalog
from bot.exceptions import ConfigError
from bot.jobs.queue import JobQueue
from bot.knowledge.library import Library
from bot.knowledge.retrieval import Retriever
from bot.llm.client import LLMClient, make_openai_client
from bot.llm.embeddings import Embedder, make_embedder, make_gate_embedder
from bot.llm.prompts import Prompt, load_prompt, system_with_knowledge
from bot.llm.tokens import TOKENS_PER_REPLY, TokenCounter
from bot.knowledge.sites import Sites
from bot.memory.vectors import FactVectors
from bot.storage.sites import SiteStore
from bot.memory.names import entity_key
from bot.storage.actions import ActionStore
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
from bot.storage.memory_meta import MemoryMetaStore
from bot.storage.redelivery import RedeliveryPolicy
from bot.storage.triggers import EXTRACTION, IDLE_SUMMARY, SummaryPolicy
from bot.storage.usage import UsageStore
from bot.storage.user_index import UserIndex
from bot.storage.outbox import OutboxStore
from bot.storage.window import WindowStore
from bot.storage.reminders import ReminderStore
from bot.jobs.reminders import ReminderJobs
from bot.reminders.book import ReminderBook
from bot.users.data import UserData

if TYPE_CHECKING:
    from bot.conversation.pipeline import Pipeline
    from bot.conversation.steps.media import MediaSource

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
    replies: Catalog  # the bot's own words in every language it speaks (docs/languages.md)


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
    gate_embedder: Embedder | None = None  # EMBEDDING_GATE_MODEL's (None: off), bot/knowledge/gate.py
    deferred: DeferredStore | None = None  # the users' deferred messages (docs/deferred.md)
    # What a role builds besides (build_services): None where the process has no use for it.
    pipeline: Pipeline | None = None  # the web's message path
    deferred_pipeline: Pipeline | None = None  # the workers': the same steps, on DEFERRED_TURN_S
    library: Library | None = None  # adds and removes documents (web, CLI and workers)
    sites: Sites | None = None  # the business's websites as sources (web, CLI and workers: the sync job)
    retriever: Retriever | None = None  # searches them (the message path, previews)
    tools: Any = None  # the business's tools (bot/conversation/tool_use.py ToolUse), where messages are answered
    reminders: ReminderBook | None = None  # the users' reminders (docs/reminders.md)


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
        replies=load_catalog(settings.PROMPTS_DIR, DEFAULT_PROMPTS_DIR),
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
    gate_embedder = make_gate_embedder(settings) if embedder is not None else None
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
    if role != "cli":  # a prompt too big for its frame stops what answers messages, at startup
        check_frame(prompts.reply, counter, prompts.knowledge, settings.KNOWLEDGE_UNKNOWN_REPLY)
    entities = EntityStore(client, entity_key, ttl_seconds=ttls.facts)
    activity = ActivityStore(client, keep_days=settings.ACTIVITY_KEEP_DAYS)
    usage = UsageStore(client, ttl_seconds=ttls.facts, activity=activity)
    handover = HandoverStore(client, ttl_seconds=settings.HANDOVER_TTL_HOURS * 3600, log_ttl_seconds=ttls.context)
    deferred = DeferredStore(client, settings.DEFERRED_TURN_S)
    actions = ActionStore(client, confirm_ttl_s=settings.TOOLS_CONFIRM_TTL_S, log_ttl_s=ttls.context)
    window = WindowStore(client, settings.WHATSAPP_WINDOW_S, held_ttl_s=ttls.context)
    outbox = OutboxStore(client, outbox_ttl_s=settings.WHATSAPP_WINDOW_S, failed_ttl_s=ttls.context)
    reminders = ReminderStore(client, keep_s=settings.REMINDERS_KEEP_DAYS * 86400,
                              max_per_user=settings.REMINDERS_MAX_PER_USER)
    users = UserData(client, store, facts, meta, jobs, entities, usage, handover, deferred, index, actions, window,
                     outbox, reminders)
    knowledge = KnowledgeStore(client)
    answers = role == "web" or (role == "worker" and settings.deferred_on)  # runs the message path
    retriever = Retriever(knowledge, counter, settings, embedder, gate_embedder) if answers or role == "cli" else None
    services = Services(settings, client, store, facts, meta, entities, usage, llm, counter, prompts, jobs, users,
                        handover, activity, knowledge, embedder, gate_embedder, deferred, retriever=retriever,
                        library=Library(knowledge, counter, settings, embedder, gate_embedder))
    assert services.library is not None
    services.reminders = ReminderBook(reminders, facts, window, ReminderJobs(jobs),
                                      template_sid=settings.TEMPLATE_REMINDER_SID)
    services.sites = Sites(SiteStore(client), services.library, settings)
    if answers:
        if role == "web":
            services.pipeline = message_path(services, media_source, full, settings.WEBHOOK_DEADLINE_S - HTTP_MARGIN_S)
        else:  # a worker's job loads the language model only if a transcript needs it (forked, then gone)
            services.deferred_pipeline = message_path(services, media_source, full, settings.DEFERRED_TURN_S,
                                                      preload_language=False)
    return services


def tool_use(settings: Settings, counter: TokenCounter, reminders: ReminderBook | None = None) -> Any:
    """Return the reply model's tools: the business's (docs/tools.md) and, with REMINDERS on,
    the reminders' (docs/reminders.md); None when there are neither. Raise ToolsConfigError
    when TOOLS_OPENAPI's document is not usable."""
    from bot.tools import load_tool_book

    book = load_tool_book(settings)
    builtins = None
    if settings.REMINDERS and reminders is not None:
        from bot.reminders.tools import ReminderTools

        builtins = ReminderTools(reminders)
    if book is None and builtins is None:
        return None
    from bot.conversation.tool_use import ToolUse
    from bot.tools.caller import ToolCaller

    caller = None
    if book is not None:
        caller = ToolCaller(book, timeout_s=settings.TOOLS_TIMEOUT_S, max_bytes=settings.TOOLS_MAX_RESPONSE_BYTES,
                            auth_header=settings.TOOLS_AUTH_HEADER)
        log.info("tools.loaded", tools=len(book.tools), writes=sum(1 for t in book.tools.values() if t.write),
                 skipped=len(book.skipped))
    return ToolUse(book, caller, counter, max_rounds=settings.TOOLS_MAX_ROUNDS,
                   result_tokens=settings.TOOLS_RESULT_MAX_TOKENS, breaker_failures=settings.TOOLS_BREAKER_FAILURES,
                   breaker_pause_s=settings.TOOLS_BREAKER_PAUSE_S, builtins=builtins)


def message_path(s: Services, media_source: MediaSource | None, full: bool, deadline_s: float,
                 preload_language: bool = True) -> Pipeline:
    """Return the message path on this clock, with a speech client when media come in; the
    steps are imported here, where messages are answered (bot/message_path.py)."""
    from bot.conversation.pipeline import Pipeline
    from bot.memory.matching import EntityMatcher
    from bot.message_path import build_steps, make_transcriber, warn_media_room

    settings = s.settings
    matcher = EntityMatcher(s.entities, settings.ENTITY_FUZZY_THRESHOLD) if settings.ENTITIES_ENABLED else None
    # Only what fetches media builds a speech client: the web app, and the workers when replies
    # are deferred (workers/jobs.py).
    transcriber = make_transcriber(settings) if settings.VOICE and media_source is not None else None
    if media_source is not None:
        warn_media_room(settings)
    s.tools = tool_use(settings, s.counter, s.reminders)
    steps = build_steps(settings, s.users, s.llm, s.counter, s.prompts.reply, with_memory=not full, matcher=matcher,
                        task_prompt=s.prompts.task, media_source=media_source, transcriber=transcriber,
                        activity=s.activity, retriever=s.retriever, knowledge_rules=s.prompts.knowledge,
                        embedder=s.embedder, gate_embedder=s.gate_embedder, catalog=s.prompts.replies,
                        preload_language=preload_language, tools=s.tools,
                        actions=s.users.actions, reminders=s.reminders)
    return Pipeline(steps, s.store, deadline_s=deadline_s)
