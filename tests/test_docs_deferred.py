"""docs/deferred.md's code facts stay true: every setting it lists is a setting with that
default, and every metric it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import Settings
from bot.config.deferred import DeferredSettings
from bot.observability import metrics

DOC = (Path(__file__).resolve().parent.parent / "docs" / "deferred.md").read_text(encoding="utf-8")


def test_every_deferred_setting_is_in_the_table_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| `?([^|`]+?)`? \|", DOC, flags=re.MULTILINE))
    assert set(DeferredSettings.model_fields) <= set(rows)
    for name, default in rows.items():
        value = Settings.model_fields[name].default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            assert str(value).lower() == default.lower(), name
        else:
            assert float(value) == float(default), name


def test_every_metric_named_exists() -> None:
    named = set(re.findall(r"`(bot_[a-z_]+)(?:\{[^}]*\})?`", DOC))
    exported = {m._name if not m._name.endswith("_total") else m._name for m in vars(metrics).values()
                if hasattr(m, "_name")}
    assert named and all(n.removesuffix("_total") in {e.removesuffix("_total") for e in exported} for n in named)
