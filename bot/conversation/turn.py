"""One message on its way through the steps: a few small records, each with its writers.

A step declares the fields it reads and writes as "record.field" (docs/architecture.md);
tests/conversation/test_steps.py checks the declarations against the code and that no step
reads what only a later step writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from bot.conversation import filtering
from bot.conversation.messages import InboundMessage, Outcome
from bot.llm.client import Completion
from bot.storage.context import Claim, CommitResult, Context, Memory
from bot.storage.records import Pair
from bot.storage.usage import usage_fields

if TYPE_CHECKING:
    from bot.conversation.prompt import BuiltPrompt
    from bot.conversation.task import ExtractedTask
    from bot.knowledge.reference import Reference
    from bot.llm.embeddings import MessageVector
    from bot.llm.transcription import Transcript
    from bot.media.images import PreparedImage
    from bot.memory.matching import EntityMatch
    from bot.storage.entities import Entity


@dataclass
class Heard:
    """What the message says, once read: its text, or what its attachment became."""

    text: str | None = None  # what enters the prompt (a voice note's transcript, a photo's caption)
    stored_text: str | None = None  # the pair's user side when it differs: "🎤 transcript", "[Photo] caption"
    image: PreparedImage | None = None  # a photo for the reply call
    transcript: Transcript | None = None  # a voice note's transcription, for usage accounting
    reply_prefix: str = ""  # goes before the reply sent (what was heard), never into the stored pair
    language: str = "en"  # what the bot's own replies are written in (docs/languages.md)
    told: str | None = None  # the language the message itself was written in, if it told


@dataclass
class Stored:
    """The user's stored state, as the claim loaded it."""

    claim: Claim | None = None  # None: Redis was unreachable, so answer without memory, store nothing
    context: Context = field(default_factory=Context)
    read_along: dict[tuple[str, str], Any] = field(default_factory=dict)  # hash fields read with the claim

    @property
    def memory(self) -> Memory:
        """The user's stored facts and memory settings, as the claim loaded them."""
        return self.claim.memory if self.claim is not None else Memory()


@dataclass
class Findings:
    """What the steps between the claim and the prompt found out about this message."""

    topic_shift: bool = False
    entity_matches: list[EntityMatch] = field(default_factory=list)  # known entities the message names
    entities: dict[str, Entity] = field(default_factory=dict)  # the user's entities, by key
    task: ExtractedTask | None = None  # the resolved task (task extraction); None: full context
    task_completion: Completion | None = None  # the task call, for usage accounting
    vector: MessageVector | None = None  # the message's (or task's) embedding, shared by knowledge and memory
    gate_vector: MessageVector | None = None  # the gate model's: is it about the business (knowledge)
    reference: Reference | None = None  # the knowledge base's chunks for this message (never stored)
    knowledge_rules: bool = False  # the knowledge base holds documents: the prompt says how to use them
    reference_trace: str | None = None  # what the knowledge step found, as ids and scores, kept for inspect
    memory_block: str = ""


@dataclass
class Answer:
    """The reply: the prompt, the model's completion, and the reply settled."""

    prompt: BuiltPrompt | None = None
    prompt_tokens_saved: int = 0  # left out of the reply prompt because the task did not need it
    completion: Completion | None = None  # None after a model failure
    reply: str | None = None  # set once the reply is settled
    status: str = "answered"  # answered, duplicate, inflight, degraded, command, handover, ...
    reason: str = filtering.REASON_OK
    proposal: dict[str, Any] | None = None  # a write the model asked for, waiting for the user's yes
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # what was called, for the user's log
    tool_rounds: list[Completion] = field(default_factory=list)  # the model calls after the first, with tools


@dataclass
class Record:
    """What the commit writes, and what it returned."""

    pair: Pair | None = None  # the valid exchange to store
    touch_context: bool = True  # False right after an erase: store nothing
    result: CommitResult | None = None


@dataclass
class Turn:
    """One message and its records; `stopped` ends it (a duplicate, one in flight)."""

    msg: InboundMessage
    deadline: float = float("inf")  # time.monotonic() by which the reply must be ready
    claim_token: str | None = None  # the caller's own claim token (a deferred message's: docs/deferred.md)
    heard: Heard = field(default_factory=Heard)
    stored: Stored = field(default_factory=Stored)
    found: Findings = field(default_factory=Findings)
    answer: Answer = field(default_factory=Answer)
    record: Record = field(default_factory=Record)
    stopped: bool = False
    finally_: list[Callable[[], None]] = field(default_factory=list)  # run when the turn ends, always
    received: float = 0.0  # Unix seconds the message arrived (its webhook's, for a deferred one)

    def __post_init__(self) -> None:
        self.received = self.received or self.msg.received_at or time.time()

    def remaining(self) -> float:
        """Return the seconds left before the deadline."""
        return self.deadline - time.monotonic()

    def settle(self, reply: str, reason: str | None = None, status: str | None = None) -> None:
        """Fix the reply; the answering steps after this one stand aside."""
        self.answer.reply = reply
        if reason is not None:
            self.answer.reason = reason
        if status is not None:
            self.answer.status = status

    def final_reply(self) -> str:
        """Return the reply as sent: the settled one, after what was heard (if anything)."""
        reply = self.answer.reply or ""
        return f"{self.heard.reply_prefix}{reply}" if reply and self.heard.reply_prefix else reply

    def usage(self) -> dict[str, int]:
        """Return the usage counts of this turn's model calls (the reply's, the rounds after it
        with the business's tools, the task's, a voice note's transcription with its audio
        seconds)."""
        calls: list[tuple[str, Any, float]] = [("reply", self.answer.completion, 0),
                                               ("task", self.found.task_completion, 0)]
        calls += [("tool_rounds", completion, 0) for completion in self.answer.tool_rounds]
        if self.heard.transcript is not None:
            calls.append(("transcription", self.heard.transcript, self.heard.transcript.audio_seconds))
        counts: dict[str, int] = {}
        for purpose, call, seconds in calls:
            if call is not None:
                for name, n in usage_fields(purpose, call.model, call.prompt_tokens, call.completion_tokens,
                                            seconds).items():
                    counts[name] = counts.get(name, 0) + n
        return counts

    def outcome(self) -> Outcome:
        """Return what the channel answers and logs."""
        result, answer = self.record.result, self.answer
        return Outcome(
            reply=self.final_reply(),
            status=answer.status,
            reason=answer.reason,
            stored=result.pair_stored if result else False,
            count_since_summary=result.count_since_summary if result else None,
            model_s=answer.completion.duration_s if answer.completion else 0.0,
            prompt_tokens=answer.prompt.tokens if answer.prompt else 0,
            seq=result.seq if result else None,
        )
