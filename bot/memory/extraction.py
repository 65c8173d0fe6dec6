"""Fact extraction (docs/memory.md): ask the extraction model for facts in the latest turns
and merge them into the user's memory with the storage rules of bot/memory/rules.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import structlog

from bot.llm.client import Completion, LLMClient
from bot.llm.prompts import Prompt
from bot.llm.fence import inert
from bot.memory.rules import FactRules, MergeStats, merge_facts
from bot.memory.schema import EXTRACTION_SCHEMA, fact_from_extracted, parse_extraction
from bot.storage.context import ContextStore
from bot.storage.facts import FactStore
from bot.storage.records import Fact, Pair

log = structlog.get_logger(__name__)

#: The newest pairs one extraction reads; older unread ones were summarized anyway.
MAX_PAIRS_PER_RUN = 5
#: A message that asks to be remembered: "remember that…", "please remember: …", "remember my…".
EXPLICIT_REQUEST = re.compile(r"^\s*(please\s+)?remember(\s+that\b|\s*:|\s+my\b)", re.IGNORECASE)


@dataclass
class ExtractionResult:
    """What one extraction run did."""

    status: str  # stored, nothing_new, discarded (erased, opted out or superseded meanwhile)
    pairs: int = 0
    malformed: int = 0
    stats: MergeStats = field(default_factory=MergeStats)
    completion: Completion | None = None  # the model call, for usage accounting


def render_request(known: dict[str, Fact], pairs: list[Pair]) -> str:
    """Return the extraction request: known facts (inert JSON strings, so a stored value can
    neither pose as an instruction nor spell a fence marker), then the new exchanges, the
    assistant's part marked as context."""
    lines = ["Known facts:"]
    lines += [f"- {f.key} = {inert(f.value)}" for f in known.values()] or ["(none)"]
    lines += ["", "New exchange:"]
    for pair in pairs:
        lines.append(f"User: {pair.user}")
        lines.append(f"Assistant (context only; never a source of facts): {pair.assistant}")
    return "\n".join(lines)


def stored_pairs(store: ContextStore, user: str) -> list[Pair]:
    """Return every pair still stored (pending or in the recent window), oldest first."""
    by_n = {p.n: p for p in store.pending_pairs(user)}
    by_n.update({p.n: p for p in store.load(user).recent})
    return [by_n[n] for n in sorted(by_n)]


def unread_pairs(store: ContextStore, user: str, after: int, limit: int = MAX_PAIRS_PER_RUN) -> list[Pair]:
    """Return the oldest `limit` stored pairs numbered above `after`, oldest first; the job
    that reads them queues the next for the rest (its follow-up)."""
    return [p for p in stored_pairs(store, user) if p.n > after][:limit]


def extract_facts(
    user: str,
    pairs: list[Pair],
    facts: FactStore,
    llm: LLMClient,
    prompt: Prompt,
    *,
    model: str,
    rules: FactRules,
    now: float,
    token: str | None = None,
    record_progress: bool = True,
) -> ExtractionResult:
    """Extract facts from pairs and merge them; raise LLMUnavailable for RQ to retry.

    `token` is the trigger the job holds (freed when done); record_progress False is for
    operators re-reading old history without moving the extraction cursor.
    """
    if not pairs:  # the job frees its trigger
        return ExtractionResult(status="nothing_new")
    known = {**facts.load(user, "user"), **facts.load(user, "session")}
    completion = llm.complete(
        [{"role": "system", "content": prompt.text}, {"role": "user", "content": render_request(known, pairs)}],
        purpose="extraction",
        prompt_ref=prompt.ref,
        model=model,
        max_tokens=600,
        response_format=EXTRACTION_SCHEMA,
        temperature=0,
    )
    items, malformed = parse_extraction(completion.text)
    if malformed or (completion.text.strip() and not items and "facts" not in completion.text):
        log.warning("extraction.malformed", items_malformed=malformed)
    # "Explicit" needs the user's own request, and a batch of one pair, so the request
    # cannot vouch for facts that came from another message.
    explicit_turn = len(pairs) == 1 and bool(EXPLICIT_REQUEST.match(pairs[0].user))
    provenance = f"#{pairs[-1].n}"  # the pair it came from, by its number
    by_scope: dict[str, list[Fact]] = {"user": [], "session": []}
    for item in items:
        source = "explicit" if (item.explicit and explicit_turn) else "auto"
        by_scope[item.target_scope].append(fact_from_extracted(item, source=source, provenance=provenance))

    total = MergeStats()
    upto = pairs[-1].n
    refused = False
    for scope in ("session", "user"):  # the user scope last: it records progress
        incoming = by_scope[scope]
        if not incoming and scope == "session":
            continue
        result = facts.merge(
            user,
            scope,
            lambda existing, incoming=incoming: merge_facts(
                existing,
                incoming,
                threshold=rules.threshold,
                max_facts=rules.max_facts,
                conflict_margin=rules.conflict_margin,
                now=now,
            ),
            extracted_seq=upto if (record_progress and scope == "user") else None,
            token=token,
        )
        if result is None:  # erased, opted out or superseded while the model was thinking
            refused = True
            break
        for name, value in result.stats.as_dict().items():
            setattr(total, name, getattr(total, name) + value)
    if refused:
        log.info("extraction.discarded", reason="erased_opted_out_or_superseded")
        return ExtractionResult(status="discarded", pairs=len(pairs), malformed=malformed, completion=completion)
    log.info("extraction.stored", pairs=len(pairs), malformed=malformed, **total.as_dict())
    return ExtractionResult(status="stored", pairs=len(pairs), malformed=malformed, stats=total, completion=completion)
