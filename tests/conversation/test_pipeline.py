"""The message path is an explicit pipeline of named steps."""

from __future__ import annotations

from bot.conversation.pipeline import Pipeline
from bot.services import Services

STEPS = ("claim", "language", "command", "rate-limit", "media", "handover", "entities", "task", "embed", "knowledge", "memory", "prompt",
         "load-shed",
         "model", "judge", "commit", "activity", "hand-off")


def test_the_steps_run_in_this_order(services: Services) -> None:
    assert services.pipeline.step_names == STEPS


def test_a_settled_reply_skips_answering_but_still_records(services: Services) -> None:
    calls: list[str] = []

    class Probe:
        def __init__(self, name: str, records: bool, settles: bool = False) -> None:
            self.name, self.records, self.settles = name, records, settles

        def __call__(self, turn) -> None:  # type: ignore[no-untyped-def]
            calls.append(self.name)
            if self.settles:
                turn.settle("done", status="command")

    from bot.conversation.messages import InboundMessage

    steps = {name: Probe(name, name in ("commit", "activity", "hand-off"), settles=name == "command") for name in STEPS}
    outcome = Pipeline(steps, services.store).handle(InboundMessage("+14155550100", "SM" + "0" * 32, "hi"))
    assert calls == ["claim", "language", "command", "commit", "activity", "hand-off"]
    assert outcome.reply == "done" and outcome.status == "command"
