"""The fitter: sections give way in the order given, the earliest of a name first, and a
section with no name in that order never does."""

from __future__ import annotations

from bot.llm.sections import Section, fit


def section(name: str, tokens: int, shrinks_to: int | None = None) -> Section:
    shrink = (lambda room: section(name, min(shrinks_to, room)) if room > 0 else None) if shrinks_to is not None else None
    return Section(name, ({"role": "system", "content": f"{name}:{tokens}"},), tokens, shrink)


def test_nothing_gives_way_within_budget_or_without_one() -> None:
    parts = [section("frame", 50), section("pair", 30), section("message", 20)]
    assert fit(parts, 100, ("pair",)) == (parts, 100)
    assert fit(parts, None, ("pair",)) == (parts, 100)


def test_the_earliest_of_a_name_goes_first_and_only_as_much_as_needed() -> None:
    old, new = section("pair", 30), section("pair", 30)
    kept, total = fit([section("frame", 50), old, new, section("message", 20)], 100, ("pair", "message"))
    assert total == 100 and len(kept) == 3 and kept[1] is new
    kept, total = fit([section("frame", 50), old, new, section("message", 20)], 75, ("pair", "message"))
    assert [s.name for s in kept] == ["frame", "message"] and total == 70


def test_the_order_decides_and_shrinking_keeps_a_smaller_section() -> None:
    parts = [section("frame", 50), section("summary", 40, shrinks_to=40), section("message", 30, shrinks_to=30)]
    kept, total = fit(parts, 100, ("summary", "message"))
    assert [(s.name, s.tokens) for s in kept] == [("frame", 50), ("summary", 20), ("message", 30)] and total == 100
    kept, total = fit(parts, 100, ("message", "summary"))
    assert [(s.name, s.tokens) for s in kept] == [("frame", 50), ("summary", 40), ("message", 10)] and total == 100


def test_a_section_outside_the_order_never_gives_way() -> None:
    kept, total = fit([section("frame", 150), section("pair", 30)], 100, ("pair",), overhead=3)
    assert [s.name for s in kept] == ["frame"] and total == 153  # over budget: the caller's frame check refuses it
