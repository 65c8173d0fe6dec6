"""Messages a worker answers instead of the webhook (docs/deferred.md), per user, in order.

Keys: ``chat_deferred:{+E164}``, a list of the user's deferred messages, oldest first, each
a flag character (``1`` once its reply is being sent) and the message's JSON (which holds
its ``sid``; what the JSON holds is the conversation's business); ``chat_deferred_run:{+E164}``,
the token of the one job that answers them (its *runner*), held while the queue is not
empty and renewed at every message. One runner per user is what keeps replies in the order
the messages came; the flag is what keeps a reply from going out twice when a runner dies
after posting it. Both keys are the user's (erased with them): a runner that finds its
hold gone after an erase sends nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import DEFERRED_PREFIX, DEFERRED_RUN_PREFIX, SEEN_PREFIX, user_key
from bot.storage.records import text
from bot.storage.scripts import Scripts

#: defer_mark's answers: send; a runner before this one may have sent it; erased; not ours.
SEND, ALREADY_SENT, GONE, LOST = "ok", "sent", "gone", "lost"


@dataclass(frozen=True)
class Queued:
    """One deferred message as stored: its JSON, and whether its reply is being sent."""

    sid: str
    data: dict[str, Any]
    sending: bool


@dataclass(frozen=True)
class Pushed:
    """What queuing a message did: 'start' (run a job with `token`), 'queued' or 'known'."""

    status: str
    token: str


class DeferredStore:
    """The per-user queue of deferred messages and the hold of the job that answers them."""

    def __init__(self, client: redis.Redis, turn_s: float) -> None:
        self.redis = client
        self.lease_s = int(2 * turn_s) + 30  # a runner that goes quiet this long is taken to be dead
        self.ttl_s = int(10 * turn_s) + 3600
        self.scripts = Scripts(client, "defer_push", "defer_mark", "defer_pop")

    @staticmethod
    def _keys(user: str, *names: str) -> dict[str, str]:
        keys = {"queue": user_key(DEFERRED_PREFIX, user), "run": user_key(DEFERRED_RUN_PREFIX, user),
                "seen": user_key(SEEN_PREFIX, user)}
        return {name: keys[name] for name in names}

    def push(self, user: str, sid: str, data: dict[str, Any]) -> Pushed:
        """Queue a message behind the user's others; a MessageSid already queued or claimed
        (a redelivery) is 'known' and changes nothing."""
        entry = "0" + json.dumps({**data, "sid": sid}, ensure_ascii=False, separators=(",", ":"))
        status, token = self.scripts.run("defer_push", self._keys(user, "queue", "run", "seen"), {
            "sid": sid, "entry": entry, "token": secrets.token_hex(8), "lease": self.lease_s, "ttl": self.ttl_s})
        return Pushed(text(status), text(token))

    def waiting(self, user: str) -> bool:
        """Return whether a runner holds the user: their next message must queue behind."""
        try:
            return bool(self.redis.exists(user_key(DEFERRED_RUN_PREFIX, user)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def head(self, user: str) -> Queued | None:
        """Return the oldest deferred message, or None when there is none."""
        try:
            raw = self.redis.lindex(user_key(DEFERRED_PREFIX, user), 0)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return _decode(raw)

    def queued(self, user: str) -> list[Queued]:
        """Return every deferred message of the user, oldest first (inspect, the console)."""
        try:
            raws = self.redis.lrange(user_key(DEFERRED_PREFIX, user), 0, -1)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [q for q in (_decode(r) for r in raws) if q is not None]

    def mark_sending(self, user: str, sid: str, token: str) -> str:
        """Mark the head message's reply as being sent (SEND); ALREADY_SENT, GONE or LOST
        when it must not be sent."""
        return text(self.scripts.run("defer_mark", self._keys(user, "queue", "run"), {"sid": sid, "token": token}))

    def pop(self, user: str, sid: str | None, token: str) -> str:
        """Take the answered message off the queue; return 'more', 'idle' or 'lost'."""
        return text(self.scripts.run("defer_pop", self._keys(user, "queue", "run"),
                                     {"sid": sid, "token": token, "lease": self.lease_s}))

    def release(self, user: str, token: str) -> bool:
        """Give up a runner's hold (its job failed for good); the queue stays, and the user's
        next deferred message starts a runner. Return whether it was held."""
        try:
            key = user_key(DEFERRED_RUN_PREFIX, user)
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.watch(key)
                if text(pipe.get(key)) != token:
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                pipe.execute()
                return True
        except redis.WatchError:
            return False
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err


def _decode(raw: Any) -> Queued | None:
    if raw is None:
        return None
    raw = text(raw)
    try:
        data = json.loads(raw[1:])
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("sid"), str):
        return None
    return Queued(data["sid"], data, raw[:1] == "1")
