"""Build the bot's collaborators once, from settings; the app, CLI and jobs share this."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from bot.config import MODEL_DEADLINE_S, Settings
from bot.conversation import Conversation
from bot.llm import LLMClient, make_openai_client
from bot.prompts import Prompt, load_prompt
from bot.queueing import JobQueue
from bot.store import ContextStore, FactStore, SummaryPolicy
from bot.tokens import TokenCounter

#: With the full-history baseline every pair stays "recent".
FULL_HISTORY_PAIRS = 1_000_000

#: One quick retry covers a dropped connection; more would hold up the reply during an outage.
REDIS_RETRY = Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1)


@dataclass(frozen=True)
class Prompts:
    """The prompt files in use."""

    reply: Prompt
    summary: Prompt
    extraction: Prompt


@dataclass
class Services:
    """The connections and domain objects one process uses."""

    settings: Settings
    redis: redis.Redis
    store: ContextStore
    facts: FactStore
    llm: LLMClient
    counter: TokenCounter
    prompts: Prompts
    jobs: JobQueue
    conversation: Conversation


def make_redis(url: str, decode_responses: bool = True) -> redis.Redis:
    """Connect lazily to Redis with short timeouts, so an outage degrades fast."""
    return redis.Redis.from_url(
        url,
        decode_responses=decode_responses,
        socket_connect_timeout=2,
        socket_timeout=5,
        retry=REDIS_RETRY,
        health_check_interval=30,
    )


def build_services(settings: Settings, client: redis.Redis | None = None) -> Services:
    """Wire Redis, the store, the queue, the model client and the conversation together."""
    client = client or make_redis(settings.REDIS_URL)
    full = settings.CONTEXT_STRATEGY == "full_history"
    store = ContextStore(
        client,
        recent_pairs=FULL_HISTORY_PAIRS if full else settings.RECENT_PAIRS,
        dedup_keep=settings.DEDUP_KEEP,
        ttl_seconds=settings.CONTEXT_TTL_DAYS * 86400,
        facts_ttl_seconds=settings.FACTS_TTL_DAYS * 86400,
        session_ttl_seconds=settings.SESSION_FACTS_TTL_HOURS * 3600,
        policy=SummaryPolicy(
            extract_every_n_pairs=0 if full else settings.EXTRACTION_INTERVAL,
            every_n_pairs=FULL_HISTORY_PAIRS if full else settings.SUMMARY_EVERY_N_PAIRS,
            # Summarize early at a third of the bound: room for ~4 more pairs while the job runs.
            soft_bytes=settings.PENDING_MAX_BYTES // 3,
            max_bytes=10**9 if full else settings.PENDING_MAX_BYTES,
        ),
    )
    facts = FactStore(
        client,
        facts_ttl_seconds=settings.FACTS_TTL_DAYS * 86400,
        session_ttl_seconds=settings.SESSION_FACTS_TTL_HOURS * 3600,
    )
    # RQ stores pickled payloads, so its connection must not decode responses.
    jobs = JobQueue(make_redis(settings.REDIS_URL, decode_responses=False), settings.retry_intervals)
    llm = LLMClient(
        make_openai_client(settings),
        settings.OPENAI_MODEL,
        timeout_s=settings.LLM_TIMEOUT_S,
        max_retries=settings.LLM_MAX_RETRIES,
        deadline_s=MODEL_DEADLINE_S,
    )
    counter = TokenCounter(settings.OPENAI_MODEL)
    prompts = Prompts(
        reply=load_prompt("reply_system", settings.PROMPTS_DIR),
        summary=load_prompt("summary", settings.PROMPTS_DIR),
        extraction=load_prompt("extract_facts", settings.PROMPTS_DIR),
    )
    conversation = Conversation(
        settings=settings,
        store=store,
        llm=llm,
        counter=counter,
        system_prompt=prompts.reply,
        jobs=None if full else jobs,
        facts=None if full else facts,
    )
    return Services(settings, client, store, facts, llm, counter, prompts, jobs, conversation)
