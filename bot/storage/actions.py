"""The write a user is asked to confirm, and the user's last tool calls (docs/tools.md).

Keys: ``chat_action:{+E164}``, a hash: ``a`` the proposed action's JSON (``id``, ``tool``,
``arguments``, ``summary``, ``sid`` of the message it answered, ``at``), ``taken`` the
MessageSid of the message that confirmed it, ``done`` the outcome of its call; TTL
`TOOLS_CONFIRM_TTL_S` from the proposal. ``chat_tool_log:{+E164}``, a list, newest first, of
``{tool, arguments, outcome, status, ms, at, write?, action?}``: what was called for the user
(never their number or the credentials), never what the API answered (that is the business's data, and can hold other people's); TTL the context's.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import ACTION_PREFIX, TOOL_LOG_PREFIX, user_key
from bot.storage.records import json_object
from bot.storage.scripts import Scripts

#: Tool calls kept per user, for inspect, export and the console.
TOOL_LOG_LENGTH = 20


class ActionStore:
    """One proposed write per user, taken once by the message that confirms it."""

    def __init__(self, client: redis.Redis, confirm_ttl_s: int, log_ttl_s: int) -> None:
        self.redis = client
        self.confirm_ttl_s = confirm_ttl_s  # TOOLS_CONFIRM_TTL_S
        self.log_ttl_s = log_ttl_s  # the context's TTL rule (0: none)
        self.scripts = Scripts(client, "action_take", "action_finish", "action_drop")

    def propose(self, user: str, action: dict[str, Any]) -> None:
        """Keep a proposed write for the user's yes, replacing any earlier one."""
        key = user_key(ACTION_PREFIX, user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.hset(key, "a", json.dumps(action, ensure_ascii=False, separators=(",", ":")))
                pipe.expire(key, self.confirm_ttl_s)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def pending(self, user: str) -> dict[str, Any] | None:
        """Return the proposal waiting for this user's answer (not yet taken), or None."""
        try:
            raw, taken = self.redis.hmget(user_key(ACTION_PREFIX, user), ["a", "taken"])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        action = json_object(raw)
        return action if isinstance(action, dict) and not taken else None

    def take(self, user: str, sid: str, at: float) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """Take the proposal for the message `sid` that affirmed it (arrived at `at`): return it
        and its outcome if this same message already ran it, or None when there is nothing to
        take (none, expired, proposed after the message, or taken by another message)."""
        got = self.scripts.run("action_take", keys={"action": user_key(ACTION_PREFIX, user)},
                               args={"sid": sid, "at": at})
        if not got:
            return None
        action, done = json_object(got[0]), json_object(got[1])
        return (action, done if isinstance(done, dict) else None) if isinstance(action, dict) else None

    def finish(self, user: str, sid: str, outcome: dict[str, Any]) -> None:
        """Record what the confirmed call came to, for a job redone for the same message."""
        self.scripts.run("action_finish", keys={"action": user_key(ACTION_PREFIX, user)},
                         args={"sid": sid, "outcome": json.dumps(outcome, ensure_ascii=False, separators=(",", ":"))})

    def drop(self, user: str, at: float) -> dict[str, Any] | None:
        """Drop a proposal nobody confirmed, for a message that arrived at `at` and said
        something else; return it, or None when none was waiting (or it came after the message)."""
        raw = self.scripts.run("action_drop", keys={"action": user_key(ACTION_PREFIX, user)}, args={"at": at})
        action = json_object(raw) if raw else None
        return action if isinstance(action, dict) else None

    def forget(self, user: str) -> None:
        """Forget a proposal, waiting or taken (a reset of the conversation)."""
        try:
            self.redis.delete(user_key(ACTION_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def log_calls(self, user: str, entries: list[dict[str, Any]]) -> None:
        """Add the turn's tool calls to the user's log (newest first, TOOL_LOG_LENGTH kept)."""
        if not entries:
            return
        key = user_key(TOOL_LOG_PREFIX, user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                for entry in entries:
                    pipe.lpush(key, json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
                pipe.ltrim(key, 0, TOOL_LOG_LENGTH - 1)
                if self.log_ttl_s:
                    pipe.expire(key, self.log_ttl_s)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def calls(self, user: str) -> list[dict[str, Any]]:
        """Return the user's last tool calls, newest first."""
        try:
            raw = self.redis.lrange(user_key(TOOL_LOG_PREFIX, user), 0, TOOL_LOG_LENGTH - 1)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [entry for entry in (json_object(r) for r in raw) if isinstance(entry, dict)]
