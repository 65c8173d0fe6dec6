"""Design note 1's validity rules for context pairs."""

import pytest

from bot.conversation import filtering
from bot.config import DEFAULT_REPHRASE_PHRASES

PHRASES = DEFAULT_REPHRASE_PHRASES
ANSWER = "Paris is the capital of France, with about two million people."


def judge(user: str, reply: str | None, finish: str | None = "stop", min_chars: int = 50):
    return filtering.judge_pair(user, reply, finish, min_chars=min_chars, rephrase_phrases=PHRASES)


def test_complete_answer_is_valid() -> None:
    assert judge("What is the capital of France?", ANSWER) == filtering.Verdict(True, "ok")


def test_model_error_is_not_context() -> None:
    assert judge("What is the capital of France?", None).reason == filtering.REASON_MODEL_ERROR


@pytest.mark.parametrize("finish", ["length", "content_filter", None])
def test_incomplete_reply_is_not_context(finish: str | None) -> None:
    verdict = judge("What is the capital of France?", ANSWER, finish)
    assert not verdict.valid and verdict.reason == filtering.REASON_INCOMPLETE


@pytest.mark.parametrize(
    "reply",
    [
        "Sorry, I didn't understand. Could you say that differently?",
        "Hmm. PLEASE REPHRASE your question about France and its capital.",
        "I don't understand what you mean by that, sorry about it.",
    ],
)
def test_rephrase_replies_are_not_context(reply: str) -> None:
    verdict = judge("What is the capital of France?", reply)
    assert not verdict.valid and verdict.reason == filtering.REASON_REPHRASE


def test_empty_reply_is_not_context() -> None:
    assert judge("What is the capital of France?", "   ").reason == filtering.REASON_EMPTY


def test_min_pair_chars_boundary() -> None:
    user, reply = "a" * 20, "b" * 29
    assert judge(user, reply).reason == filtering.REASON_TOO_SHORT  # 49 chars
    assert judge(user, reply + "c").valid  # 50 chars


def test_configured_phrases_are_used() -> None:
    verdict = filtering.judge_pair(
        "What is the capital of France?", ANSWER, "stop", min_chars=0, rephrase_phrases=("two million",)
    )
    assert verdict.reason == filtering.REASON_REPHRASE
