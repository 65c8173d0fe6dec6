"""The message path: one handler runs each inbound message through named steps, in order.

    claim -> command -> rate-limit -> media -> handover -> entities -> task -> embed
    -> knowledge -> memory -> prompt -> load-shed -> model -> judge -> commit -> activity
    -> hand-off

Each step (bot/conversation/steps.py) reads and writes one `Turn`. A step that settles the
reply (a command, a message with no text, a handover, the judge) makes the answering steps
after it stand aside; `commit`, `activity` and `hand-off` still run, because they record what
happened. A
duplicate or a message still in flight stops the turn at `claim`.

Where a new step goes: one more entry in `build_steps`, reading and writing fields of the
Turn (as `entities` does for `memory`, and `task` for `memory` and `prompt`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from bot.conversation import filtering
from bot.conversation.messages import InboundMessage, Outcome
from bot.conversation.prompt import BuiltPrompt
from bot.exceptions import StoreUnavailable
from bot.llm.client import Completion
from bot.memory.matching import EntityMatch
from bot.storage.entities import Entity
from bot.storage.context import Claim, CommitResult, Context, ContextStore, Memory
from bot.storage.records import Pair

if TYPE_CHECKING:  # the task step's module imports Turn from here
    from bot.conversation.task import ExtractedTask
    from bot.knowledge.reference import Reference
    from bot.llm.embeddings import MessageVector
    from bot.llm.transcription import Transcript
    from bot.media.images import PreparedImage


@dataclass
class Turn:
    """One message on its way through the steps, and everything they found out."""

    msg: InboundMessage
    deadline: float = float("inf")  # time.monotonic() by which the reply must be ready
    claim_token: str | None = None  # the caller's own claim token (a deferred message's: docs/deferred.md)
    claim: Claim | None = None  # None: Redis was unreachable, so answer without memory, store nothing
    context: Context = field(default_factory=Context)
    read_along: dict[tuple[str, str], Any] = field(default_factory=dict)  # hash fields read with the claim
    text: str | None = None  # what enters the prompt (a voice note's transcript, a photo's caption)
    stored_text: str | None = None  # the pair's user side when it differs: "🎤 transcript", "[Photo] caption"
    image: PreparedImage | None = None  # a photo for the reply call
    transcript: Transcript | None = None  # a voice note's transcription, for usage accounting
    reply_prefix: str = ""  # goes before the reply sent (what was heard), never into the stored pair
    topic_shift: bool = False
    entity_matches: list[EntityMatch] = field(default_factory=list)  # known entities the message names
    entities: dict[str, Entity] = field(default_factory=dict)  # the user's entities, by key
    task: ExtractedTask | None = None  # the resolved task (task extraction); None: full context
    task_completion: Completion | None = None  # the task call, for usage accounting
    vector: MessageVector | None = None  # the message's (or task's) embedding, shared by knowledge and memory
    reference: Reference | None = None  # the knowledge base's chunks for this message (never stored)
    knowledge_rules: bool = False  # the knowledge base holds documents: the prompt says how to use them
    reference_trace: str | None = None  # what the knowledge step found, as ids and scores, kept for inspect
    prompt_tokens_saved: int = 0  # left out of the reply prompt because the task did not need it
    memory_block: str = ""
    prompt: BuiltPrompt | None = None
    completion: Completion | None = None  # None after a model failure
    pair: Pair | None = None  # the valid exchange to store
    reply: str | None = None  # set once the reply is settled
    status: str = "answered"  # answered, duplicate, inflight, degraded, command, handover
    reason: str = filtering.REASON_OK
    touch_context: bool = True  # False right after an erase: store nothing
    commit: CommitResult | None = None
    stopped: bool = False  # nothing more to do, not even recording (a duplicate, one in flight)
    finally_: list[Callable[[], None]] = field(default_factory=list)  # run when the turn ends, always

    def remaining(self) -> float:
        """Return the seconds left before the deadline."""
        return self.deadline - time.monotonic()

    @property
    def memory(self) -> Memory:
        """The user's stored facts and memory settings, as the claim loaded them."""
        return self.claim.memory if self.claim is not None else Memory()

    def settle(self, reply: str, reason: str | None = None, status: str | None = None) -> None:
        """Fix the reply; the answering steps after this one stand aside."""
        self.reply = reply
        if reason is not None:
            self.reason = reason
        if status is not None:
            self.status = status

    def final_reply(self) -> str:
        """Return the reply as sent: the settled one, after what was heard (if anything)."""
        reply = self.reply or ""
        return f"{self.reply_prefix}{reply}" if reply and self.reply_prefix else reply

    def outcome(self) -> Outcome:
        """Return what the channel answers and logs."""
        commit = self.commit
        return Outcome(
            reply=self.final_reply(),
            status=self.status,
            reason=self.reason,
            stored=commit.pair_stored if commit else False,
            count_since_summary=commit.count_since_summary if commit else None,
            model_s=self.completion.duration_s if self.completion else 0.0,
            prompt_tokens=self.prompt.tokens if self.prompt else 0,
            seq=commit.seq if commit else None,
        )


class Step(Protocol):
    """One named stage of the message path."""

    name: str
    #: True for steps that record the turn (commit, hand-off): they run after the reply is settled.
    records: bool

    def __call__(self, turn: Turn) -> None:
        """Do this step's part of the turn."""


class Pipeline:
    """Answer messages exactly once, from compact context, through the steps in order."""

    def __init__(self, steps: Sequence[Step], store: ContextStore, deadline_s: float = float("inf")) -> None:
        self.steps = tuple(steps)
        self.store = store
        self.deadline_s = deadline_s  # every step together, claim to hand-off

    @property
    def step_names(self) -> tuple[str, ...]:
        """Return the names of the steps, in the order they run."""
        return tuple(step.name for step in self.steps)

    def handle(self, msg: InboundMessage, claim_token: str | None = None) -> Outcome:
        """Answer one inbound message and record it. With `claim_token`, the claim is taken
        with it: the same caller run again (a deferred message's job redone after its worker
        died) takes its own claim back at once instead of waiting for its lease."""
        turn = Turn(msg, deadline=time.monotonic() + self.deadline_s, claim_token=claim_token)
        try:
            for step in self.steps:
                if turn.stopped:
                    break
                if turn.reply is not None and not step.records:
                    continue
                step(turn)
        except BaseException:
            # Unexpected failure: forget the claim so a redelivery can try again.
            if turn.claim is not None:
                try:
                    self.store.release(msg.user, turn.claim, msg.sid)
                except StoreUnavailable:
                    pass
            raise
        finally:
            for release in turn.finally_:
                release()
        return turn.outcome()
