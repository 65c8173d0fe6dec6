"""The console's operator accounts, and the count of failed sign-ins.

Key ``console_operators`` (bot/storage/keys.py OPERATORS_KEY): hash, operator name -> JSON
``{"hash": werkzeug scrypt hash, "created_at": Unix seconds, "created_by": who added it}``;
no TTL. Keys ``console_signin:<digest>``: string counter of failed sign-ins for one name
from one address (the digest of both, so no name or address sits in a key name); it
expires CONSOLE_SIGNIN_WINDOW_S after the first failure (TTL rule "signin").
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass

import redis
from werkzeug.security import check_password_hash, generate_password_hash

from bot.exceptions import StoreUnavailable
from bot.storage.keys import OPERATORS_KEY, SIGNIN_PREFIX
from bot.storage.records import text

#: Operator names: short, lower case, safe in logs and audit lines ("console:<name>").
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,31}$")
#: The name the admin token signs in as; no account may take it.
ADMIN_NAME = "admin"
#: NIST SP 800-63B asks for at least 8; operators reach every user's data, so a little more.
MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 200
#: Checked against when the name is unknown, so a wrong name costs as long as a wrong password
#: (made at the first such sign-in: scrypt costs about 70 ms, which no CLI command should pay).
_dummy_hash: str | None = None


def _dummy() -> str:
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = generate_password_hash("not-a-password-of-anyone", method="scrypt")
    return _dummy_hash


class AccountError(ValueError):
    """An operator account that cannot be added or removed as asked."""


@dataclass(frozen=True)
class Operator:
    """One operator account, without its hash."""

    name: str
    created_at: float
    created_by: str


class OperatorStore:
    """Add, remove, list and check operator accounts; count failed sign-ins."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def add(self, name: str, password: str, created_by: str) -> Operator:
        """Create or replace an account (a new password for an existing name)."""
        check_name(name)
        if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
            raise AccountError(f"the password must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")
        now = time.time()
        record = {"hash": generate_password_hash(password, method="scrypt"), "created_at": int(now),
                  "created_by": created_by}
        try:
            self.redis.hset(OPERATORS_KEY, name, json.dumps(record))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return Operator(name, float(int(now)), created_by)

    def remove(self, name: str) -> bool:
        """Delete an account; return whether it existed."""
        try:
            return bool(self.redis.hdel(OPERATORS_KEY, name))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def exists(self, name: str) -> bool:
        """Return whether the account exists."""
        try:
            return bool(self.redis.hexists(OPERATORS_KEY, name))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def list(self) -> list[Operator]:
        """Return every account, by name."""
        try:
            raw = self.redis.hgetall(OPERATORS_KEY)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        out = []
        for name, value in raw.items():
            record = _record(value)
            out.append(Operator(text(name), float(record.get("created_at") or 0), str(record.get("created_by", ""))))
        return sorted(out, key=lambda o: o.name)

    def verify(self, name: str, password: str) -> bool:
        """Return whether the password is this account's; as slow for an unknown name."""
        try:
            raw = self.redis.hget(OPERATORS_KEY, name) if NAME.match(name) else None
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        stored = _record(raw).get("hash") if raw is not None else None
        if not isinstance(stored, str):
            check_password_hash(_dummy(), password)
            return False
        return check_password_hash(stored, password)

    # -- failed sign-ins ------------------------------------------------------------------
    def failures(self, name: str, address: str) -> int:
        """Return the failed sign-ins of this name from this address in the window."""
        try:
            return int(self.redis.get(_signin_key(name, address)) or 0)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def count_failure(self, name: str, address: str, window_s: int) -> int:
        """Count one failed sign-in; the window starts at the first failure. Return the count."""
        key = _signin_key(name, address)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.ttl(key)
                count, ttl = pipe.execute()
            if ttl < 0:  # the first failure of a window (EXPIRE NX needs Redis 7)
                self.redis.expire(key, window_s)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return int(count)

    def clear_failures(self, name: str, address: str) -> None:
        """Forget the failures of this name from this address (after a good sign-in)."""
        try:
            self.redis.delete(_signin_key(name, address))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err


def check_name(name: str) -> None:
    """Refuse a name that is malformed or reserved for the admin token."""
    if not NAME.match(name):
        raise AccountError("the name must be 1 to 32 characters: lower-case letters, digits, '.', '_' or '-'")
    if name == ADMIN_NAME:
        raise AccountError(f"{ADMIN_NAME!r} is the admin token's name; choose another")


def _record(raw: object) -> dict:  # type: ignore[type-arg]
    try:
        record = json.loads(text(raw))
    except (TypeError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _signin_key(name: str, address: str) -> str:
    digest = hashlib.sha256(f"{name}\n{address}".encode()).hexdigest()[:32]
    return f"{SIGNIN_PREFIX}{digest}"
