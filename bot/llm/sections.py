"""A prompt as budgeted sections: each says what it costs and how it gives way, and one fitter
decides, in the order it is given, which give way until the prompt fits (docs/conversation.md).

Sections that may not give way (the system frame, the memory block) simply have no name in
that order. A section shrinks through its own callback, so the fitter knows nothing of what
a section holds: the knowledge base's reference re-picks its chunks, a summary is cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Section:
    """One part of a prompt: its messages, their cost, and how it gives way."""

    name: str
    messages: tuple[dict[str, Any], ...]
    tokens: int
    #: Given the tokens it may take, return a smaller section, or None to leave it out;
    #: without a callback the section is left out whole.
    shrink: Callable[[int], Section | None] | None = None
    value: Any = None  # what it holds, for the caller's report (the reference as it went in)


def fit(sections: Sequence[Section], budget: int | None, give_way: Sequence[str],
        overhead: int = 0) -> tuple[list[Section], int]:
    """Return the sections that fit within `budget` tokens (with `overhead` counted too) and
    their total: sections named in `give_way` shrink or go, in that order, and among sections
    of one name the earliest first. With budget None nothing gives way."""
    kept = list(sections)
    total = overhead + sum(s.tokens for s in kept)
    if budget is None:
        return kept, total
    for name in give_way:
        i = 0
        while total > budget and i < len(kept):
            section = kept[i]
            if section.name != name:
                i += 1
                continue
            others = total - section.tokens
            smaller = section.shrink(budget - others) if section.shrink is not None else None
            if smaller is None:
                kept.pop(i)
            else:
                kept[i] = smaller
                i += 1
            total = others + (smaller.tokens if smaller is not None else 0)
        if total <= budget:
            break
    return kept, total
