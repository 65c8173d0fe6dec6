"""The message path: one handler runs each inbound message through named steps, in order.

`ORDER` is the one list of the steps (docs/architecture.md is checked against it). Each step
lives in bot/conversation/steps/<name>.py, reads and writes the records of one `Turn`
(bot/conversation/turn.py), and declares which. A step that settles the reply (a command, a
message with no text, a handover, the judge) makes the answering steps after it stand aside;
the recording steps (commit, activity, hand-off) still run. A duplicate or a message still in
flight stops the turn at `claim`.
"""

from __future__ import annotations

import time
from typing import Mapping, Protocol

from bot.conversation.messages import InboundMessage, Outcome
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import STEP_SECONDS
from bot.storage.context import ContextStore

#: The steps, in the order they run. A deployment may leave out the optional ones (see
#: OPTIONAL); the rest always run.
ORDER: tuple[str, ...] = (
    "claim", "language", "command", "rate-limit", "media", "handover", "confirm", "entities", "task", "embed",
    "knowledge", "memory", "prompt", "load-shed", "model", "judge", "commit", "actions", "activity", "hand-off",
)
#: Steps a process may run without: handover (no store), confirm and actions (no tools), task
#: (the full-history baseline), activity (no console counts).
OPTIONAL = frozenset({"handover", "confirm", "task", "actions", "activity"})


class Step(Protocol):
    """One named stage of the message path."""

    name: str
    #: True for steps that record the turn (commit, activity, hand-off): they run after the reply is settled.
    records: bool
    #: The Turn fields read and written, as "record.field" (bot/conversation/turn.py).
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    def __call__(self, turn: Turn) -> None:
        """Do this step's part of the turn."""


def in_order(steps: Mapping[str, Step | None]) -> list[Step]:
    """Return the given steps in ORDER; raise ValueError for an unknown name, a step built
    under another name, or a missing step that is not optional."""
    unknown = set(steps) - set(ORDER)
    if unknown:
        raise ValueError(f"unknown steps: {sorted(unknown)}")
    ordered = []
    for name in ORDER:
        step = steps.get(name)
        if step is None:
            if name not in OPTIONAL:
                raise ValueError(f"the message path needs the {name!r} step")
            continue
        if step.name != name:
            raise ValueError(f"{name!r} was given the {step.name!r} step")
        ordered.append(step)
    return ordered


class Pipeline:
    """Answer messages exactly once, from compact context, through the steps in order."""

    def __init__(self, steps: Mapping[str, Step | None], store: ContextStore, deadline_s: float = float("inf")) -> None:
        self.steps = tuple(in_order(steps))
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
                if turn.answer.reply is not None and not step.records:
                    continue
                began = time.perf_counter()
                step(turn)
                STEP_SECONDS.labels(step=step.name).observe(time.perf_counter() - began)
        except BaseException:
            # Unexpected failure: forget the claim so a redelivery can try again.
            if turn.stored.claim is not None:
                try:
                    self.store.release(msg.user, turn.stored.claim, msg.sid)
                except StoreUnavailable:
                    pass
            raise
        finally:
            for release in turn.finally_:
                release()
        return turn.outcome()
