"""Scoring of the fact-extraction eval (bot/dev/evaluation.py)."""

from __future__ import annotations

import pytest

from bot.dev.evaluation import Case, aggregate, score_case
from tests.conftest import fact


# -- eval scoring ------------------------------------------------------------------------
def test_eval_scoring() -> None:
    case = Case("c", "name", [("I'm Ana", "Hi")], {"name": "Ana", "city": "Lisbon"}, ["king"], None)
    result = score_case(case, [fact("name", "Ana"), fact("title", "king of nowhere")])
    assert result["expected_found"] == {"name": True, "city": False} and result["forbidden_hits"] == ["title"]
    negative = score_case(Case("n", "joke", [("lol", "")], {}, [], None), [fact("x", "y")])
    update = score_case(
        Case("u", "update", [], {"city": "Porto"}, [], {"key": "city", "from": "Lisbon", "to": "Porto"}),
        [fact("city", "Porto")],
    )
    report = aggregate([result, negative, update])
    assert report["precision"] == pytest.approx(2 / 4)
    assert report["recall"] == pytest.approx(2 / 3)
    assert report["false_positive_rate"] == pytest.approx(2 / 3)
    assert report["update_correctness"] == 1.0
