"""Is a message about the business at all? The knowledge base's gate (docs/semantic.md).

Two kinds of message get no passage from a good document search, for opposite reasons:
- one about anything but the business (a greeting, a joke, the capital of France): a
  reference costs tokens there and can distract the model, so it gets none;
- one about the business that no document answers ("do you do implants on Sundays?"): the
  nearest passage is useful, because the reply model reads it, sees that it does not answer,
  says so and offers a person.

So the gate asks one question of the message, not of each passage: does its best passage
stand out of the anchors (passages about nothing in particular, bot/llm/anchors.py)? The
gate model (USE v3) separates the two far better than e5 (AUC .97-.99 against .91-.93 on
`eval knowledge`); with e5 ranking, both models' margins are summed. A message about the
business then gets its best passages within the reference's token share; one that is not,
none. Its words alone also make it one about the business when they cover much of the
question. Without the gate model's vectors (it is off, failed, or the documents predate it),
each passage goes through the ranking model's own gate, hit by hit (reference.py eligible).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.config.knowledge import ABOUT_MIN_GATE_ONLY, ABOUT_MIN_PAIR, ABOUT_MIN_WORDS

BUSINESS, NOT_BUSINESS, BY_HIT = "business", "not_business", "by_hit"


@dataclass(frozen=True)
class Gate:
    """The gate's decision on one message, and why."""

    decision: str  # business, not_business, or by_hit (no gate model: hit by hit)
    reason: str
    score: float | None = None  # what was compared with the threshold
    threshold: float | None = None
    ranking_margin: float | None = None  # the ranking model's best cosine over its anchor mean
    gate_margin: float | None = None  # the gate model's
    words: float | None = None  # the best lexical score (the share of the question's words)

    def to_public(self) -> dict[str, Any]:
        """Return the decision as inspect, `kb search` and the console show it."""
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)
        return {"decision": self.decision, "reason": self.reason, "score": r(self.score),
                "threshold": self.threshold, "ranking_margin": r(self.ranking_margin),
                "gate_margin": r(self.gate_margin), "words": r(self.words)}


def decide(ranking_margin: float | None, gate_margin: float | None, words: float | None, paired: bool) -> Gate:
    """Return whether a message is about the business. paired: the ranking model is the local
    e5, calibrated with the gate model (their margins are summed); otherwise the gate
    model's margin decides alone."""
    if gate_margin is None:
        return Gate(BY_HIT, "no gate-model vector: each passage through the ranking model's gate",
                    ranking_margin=ranking_margin, words=words)
    if paired and ranking_margin is not None:
        score, threshold = ranking_margin + gate_margin, ABOUT_MIN_PAIR
        how = f"margins {ranking_margin:+.3f} (ranking) {gate_margin:+.3f} (gate) = {score:.3f}"
    else:
        score, threshold = gate_margin, ABOUT_MIN_GATE_ONLY
        how = f"gate margin {gate_margin:+.3f}"
    common = {"score": score, "threshold": threshold, "ranking_margin": ranking_margin, "gate_margin": gate_margin,
              "words": words}
    if score >= threshold:
        return Gate(BUSINESS, f"about the business: {how} >= {threshold}", **common)
    if words is not None and words >= ABOUT_MIN_WORDS:
        return Gate(BUSINESS, f"about the business: its words cover {words:.2f} of the question "
                              f"(>= {ABOUT_MIN_WORDS}; {how})", **common)
    return Gate(NOT_BUSINESS, f"not about the business: {how} < {threshold}", **common)
