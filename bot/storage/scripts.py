"""Load the Lua scripts in lua/ and run them with named keys and one JSON object of arguments.

Each script opens with a header comment; its `-- KEYS:` line names the keys in order, and
the loader turns that into `K.<name>` inside the script, so neither side counts positions.
Names in brackets at the end are optional: a call may leave them out, and they are nil then.
Every script gets the shared helpers (lua/helpers.lua) and its arguments as the table `A`,
decoded from one JSON object (None values are left out: cjson would decode null as a truthy
value). A call that names other keys than the header fails at once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import redis

from bot.exceptions import StoreUnavailable

LUA_DIR = Path(__file__).resolve().parent / "lua"
#: A field `run_with_reads` could not read (an error on its node), unlike None: no such field.
UNREAD = object()
_KEYS_LINE = re.compile(r"^-- KEYS:(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class LuaScript:
    """One script's source, ready to register, and the names of its keys in order."""

    name: str
    keys: tuple[str, ...]
    source: str
    optional: frozenset[str] = frozenset()

    def ordered(self, keys: dict[str, str]) -> list[str]:
        """Return the given keys in the header's order; raise ValueError for a wrong set."""
        given = set(keys)
        if not set(self.keys) - self.optional <= given <= set(self.keys):
            raise ValueError(f"lua/{self.name}.lua takes keys {self.keys}, given {tuple(keys)}")
        ordered = [keys[k] for k in self.keys if k in given]
        if [k for k in self.keys if k in given] != list(self.keys[: len(ordered)]):
            raise ValueError(f"lua/{self.name}.lua: an optional key was left out before a given one")
        return ordered


@lru_cache(maxsize=None)
def load_script(name: str) -> LuaScript:
    """Return lua/<name>.lua with the helpers, its named keys and its decoded arguments in front."""
    body = (LUA_DIR / f"{name}.lua").read_text(encoding="utf-8")
    match = _KEYS_LINE.search(body)
    if match is None:
        raise ValueError(f"lua/{name}.lua: the header needs a '-- KEYS:' line")
    names = match.group(1).split()
    keys = tuple(name.strip("[]") for name in names)
    optional = frozenset(name.strip("[]") for name in names if name.startswith("["))
    named = ", ".join(f"{key} = KEYS[{i}]" for i, key in enumerate(keys, start=1))
    prelude = (LUA_DIR / "helpers.lua").read_text(encoding="utf-8")
    prelude += f"local K = {{{named}}}\nlocal A = cjson.decode(ARGV[1])\n"
    return LuaScript(name=name, keys=keys, source=prelude + body, optional=optional)


class Scripts:
    """The scripts one store uses, registered on its client."""

    def __init__(self, client: redis.Redis, *names: str) -> None:
        self.client = client
        self._scripts = {}
        for name in names:
            script = load_script(name)
            self._scripts[name] = (script, client.register_script(script.source))

    def run(self, name: str, keys: dict[str, str], args: dict[str, Any]) -> Any:
        """Run one script; Redis errors become StoreUnavailable."""
        script, registered = self._scripts[name]
        ordered = script.ordered(keys)
        try:
            return registered(
                keys=ordered,
                args=[json.dumps(_without_none(args), ensure_ascii=False, separators=(",", ":"))],
            )
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err


    def run_with_reads(
        self, name: str, keys: dict[str, str], args: dict[str, Any], reads: list[tuple[str, str]]
    ) -> tuple[Any, list[Any]]:
        """Run one script and read hash fields (HGET key field) in the same round trip.

        A field that could not be read comes back UNREAD (the caller reads it again, or does
        without); a script Redis no longer holds (after a restart) runs the ordinary way.
        """
        if not reads:
            return self.run(name, keys, args), []
        script, registered = self._scripts[name]
        ordered = script.ordered(keys)
        encoded = json.dumps(_without_none(args), ensure_ascii=False, separators=(",", ":"))
        try:
            pipe = self.client.pipeline(transaction=False)
            # execute_command: redis-py's cluster pipeline blocks its evalsha() method, but
            # routes an EVALSHA by its keys like any command (all of a script's keys share a slot).
            pipe.execute_command("EVALSHA", registered.sha, len(ordered), *ordered, encoded)
            for key, field in reads:
                pipe.hget(key, field)
            results = pipe.execute(raise_on_error=False)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        first, rest = results[0], [UNREAD if isinstance(r, Exception) else r for r in results[1:]]
        if isinstance(first, redis.exceptions.NoScriptError):
            return self.run(name, keys, args), [UNREAD] * len(reads)
        if isinstance(first, Exception):
            if isinstance(first, redis.RedisError):
                raise StoreUnavailable(str(first)) from first
            raise first
        return first, rest


def _without_none(value: Any) -> Any:
    """Drop None values from dicts (nested too), so an absent field reads as nil in Lua."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_none(v) for v in value]
    return value
