"""The Lua loader: named keys from each script's header, arguments as one JSON object."""

from __future__ import annotations

import re

import fakeredis
import pytest

from bot.storage.scripts import LUA_DIR, Scripts, load_script

pytestmark = pytest.mark.cluster

SCRIPTS = sorted(p.stem for p in LUA_DIR.glob("*.lua") if p.stem != "helpers")


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_names_its_keys_and_arguments_in_its_header(name: str) -> None:
    body = (LUA_DIR / f"{name}.lua").read_text()
    header = body.split("\n\n")[0]
    assert re.search(r"^-- KEYS: \w+", header, re.MULTILINE), "a -- KEYS: line"
    assert re.search(r"^-- A: ", header, re.MULTILINE), "a -- A: line naming the JSON fields"
    assert load_script(name).keys  # the loader reads the same header
    # every field the script reads is named in its header (helpers take A as a parameter)
    for field in set(re.findall(r"\bA\.(\w+)", body)):
        assert re.search(rf"\b{field}\b", header), f"{name}.lua reads A.{field} but its header does not name it"


def test_keys_are_passed_by_name_in_header_order(fake_redis: fakeredis.FakeRedis) -> None:
    scripts = Scripts(fake_redis, "release")
    fake_redis.hset("seen", "SM1", '{"st":"pending","tok":"t"}')
    assert scripts.run("release", {"seen": "seen"}, {"sid": "SM1", "token": "t"}) == 1
    assert fake_redis.hget("seen", "SM1") is None


def test_wrong_keys_fail_before_reaching_redis(fake_redis: fakeredis.FakeRedis) -> None:
    scripts = Scripts(fake_redis, "release")
    with pytest.raises(ValueError, match="takes keys"):
        scripts.run("release", {"context": "x"}, {"sid": "SM1", "token": "t"})


def test_none_arguments_are_absent_not_null(fake_redis: fakeredis.FakeRedis) -> None:
    """cjson decodes null as a truthy value; None must read as nil in Lua."""
    scripts = Scripts(fake_redis, "take_trigger")
    scripts.run("take_trigger", {"hash": "h"}, {"job": "x_job", "now": 5, "token": "tok", "unused": None})
    assert fake_redis.hgetall("h") == {"x_job_at": "5", "x_job_token": "tok"}
