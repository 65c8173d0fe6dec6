"""The gate's decision on a message (bot/knowledge/gate.py): both margins summed with e5
ranking, the gate model's alone with another ranking model, the words' own evidence, and
hit by hit without the gate model."""

from __future__ import annotations

from bot.config.knowledge import ABOUT_MIN_GATE_ONLY, ABOUT_MIN_PAIR, ABOUT_MIN_WORDS
from bot.knowledge.gate import decide


def test_with_e5_ranking_both_margins_are_summed() -> None:
    half = ABOUT_MIN_PAIR / 2
    assert decide(half + 0.01, half, None, paired=True).decision == "business"
    below = decide(half - 0.01, half, None, paired=True)
    assert below.decision == "not_business" and below.threshold == ABOUT_MIN_PAIR
    assert below.reason.startswith("not about the business: margins") and below.to_public()["score"] is not None


def test_another_ranking_model_leaves_the_gate_models_margin_alone() -> None:
    assert decide(5.0, ABOUT_MIN_GATE_ONLY - 0.01, None, paired=False).decision == "not_business"
    assert decide(-5.0, ABOUT_MIN_GATE_ONLY, None, paired=False).decision == "business"
    assert decide(None, ABOUT_MIN_GATE_ONLY, None, paired=True).threshold == ABOUT_MIN_GATE_ONLY  # e5 failed


def test_words_that_cover_the_question_make_it_about_the_business() -> None:
    gate = decide(0.0, 0.0, ABOUT_MIN_WORDS, paired=True)
    assert gate.decision == "business" and "its words cover" in gate.reason
    assert decide(0.0, 0.0, ABOUT_MIN_WORDS - 0.01, paired=True).decision == "not_business"


def test_without_the_gate_models_vector_each_passage_is_judged_by_itself() -> None:
    gate = decide(0.2, None, 0.9, paired=True)
    assert gate.decision == "by_hit" and gate.score is None
