"""The key table names every per-user key, each with a TTL rule that a setting controls."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.storage.keys import TTL_RULES, USER_KEYS, user_keys
import pytest

pytestmark = pytest.mark.cluster


def test_every_key_has_a_ttl_rule_set_by_a_setting() -> None:
    assert {spec.ttl for spec in USER_KEYS} <= set(TTL_RULES)
    assert set(TTL_RULES.values()) <= set(Settings.model_fields)


def test_every_user_key_is_in_the_key_table() -> None:
    table = (Path(__file__).parents[2] / "docs" / "redis-keys.md").read_text()
    for spec in USER_KEYS:
        assert f"`{spec.prefix}{{+E164}}`" in table


def test_user_keys_share_one_hash_tag() -> None:
    assert {key.split("{", 1)[1] for key in user_keys("+14155550100")} == {"+14155550100}"}
