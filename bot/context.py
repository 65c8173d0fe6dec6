"""Build the reply prompt from compact context, within the token budget."""

from __future__ import annotations

from dataclasses import dataclass

from bot.store import Context, Pair
from bot.tokens import TokenCounter

SUMMARY_HEADER = "Summary of the earlier conversation (for context only):\n"


@dataclass(frozen=True)
class BuiltPrompt:
    """The messages sent to the model and how they were fitted to the budget."""

    messages: list[dict[str, str]]
    tokens: int
    pairs_used: int
    pairs_dropped: int
    summary_truncated: bool
    user_truncated: bool


def _pair_messages(pairs: list[Pair]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for pair in pairs:
        out.append({"role": "user", "content": pair.user})
        out.append({"role": "assistant", "content": pair.assistant})
    return out


def build_prompt(
    system_prompt: str,
    context: Context,
    user_text: str,
    counter: TokenCounter,
    *,
    max_tokens: int | None,
    max_user_tokens: int,
) -> BuiltPrompt:
    """Return system prompt, summary, recent pairs and the message, within max_tokens.

    The oldest pairs go first, then the summary is shortened; the message itself is cut
    to max_user_tokens, and further only if nothing else is left to give.
    With max_tokens None (the full-history baseline) nothing is dropped.
    """
    user_truncated = False
    if max_tokens is not None and counter.count(user_text) > max_user_tokens:
        user_text = counter.truncate(user_text, max_user_tokens)
        user_truncated = True
    system = [{"role": "system", "content": system_prompt}]
    current = [{"role": "user", "content": user_text}]
    summary = context.summary.strip()
    pairs = list(context.recent)

    def assemble() -> list[dict[str, str]]:
        middle = [{"role": "system", "content": SUMMARY_HEADER + summary}] if summary else []
        return system + middle + _pair_messages(pairs) + current

    messages = assemble()
    tokens = counter.count_messages(messages)
    if max_tokens is None:
        return BuiltPrompt(messages, tokens, len(pairs), 0, False, user_truncated)

    dropped = 0
    while tokens > max_tokens and pairs:
        pairs.pop(0)
        dropped += 1
        messages = assemble()
        tokens = counter.count_messages(messages)

    summary_truncated = False
    if tokens > max_tokens and summary:
        room = max_tokens - counter.count_messages(system + current) - len(
            counter.encoding.encode(SUMMARY_HEADER)
        ) - 4
        summary = counter.truncate(summary, room) if room > 20 else ""
        summary_truncated = True
        messages = assemble()
        tokens = counter.count_messages(messages)
        if tokens > max_tokens:  # token boundaries can shift by one or two on re-encoding
            summary = ""
            messages = assemble()
            tokens = counter.count_messages(messages)

    if tokens > max_tokens:
        # Only the system prompt and the message are left: cut the message to fit.
        room = max_tokens - counter.count_messages(system + [{"role": "user", "content": ""}]) - 4
        current = [{"role": "user", "content": counter.truncate(user_text, max(room, 1))}]
        user_truncated = True
        messages = assemble()
        tokens = counter.count_messages(messages)

    return BuiltPrompt(messages, tokens, len(pairs), dropped, summary_truncated, user_truncated)
