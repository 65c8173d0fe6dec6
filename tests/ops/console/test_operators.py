"""Operator accounts: the store (hashes, reserved names, failed sign-ins) and
`whatsapp-bot operators add|list|remove`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

import pytest

from bot.ops import operator_commands
from bot.storage.keys import OPERATORS_KEY
from bot.storage.operators import AccountError, OperatorStore
from tests.cli_support import run_cli
from tests.conftest import AUTH_TOKEN, redis_env
from tests.ops.console.support import OPERATOR, PASSWORD, sign_in


# -- the store (fakeredis) ------------------------------------------------------------------
def test_accounts_are_hashed_checked_listed_and_removed(fake_redis) -> None:  # type: ignore[no-untyped-def]
    store = OperatorStore(fake_redis)
    store.add(OPERATOR, PASSWORD, created_by="cli")
    stored = json.loads(fake_redis.hget(OPERATORS_KEY, OPERATOR))
    assert stored["hash"].startswith("scrypt:") and PASSWORD not in stored["hash"] and stored["created_by"] == "cli"
    assert store.verify(OPERATOR, PASSWORD) and not store.verify(OPERATOR, PASSWORD + "!")
    assert not store.verify("nobody", PASSWORD) and not store.verify("../x", PASSWORD)
    assert [o.name for o in store.list()] == [OPERATOR] and store.exists(OPERATOR)
    store.add(OPERATOR, "a brand new password", created_by="cli")  # a new password
    assert store.verify(OPERATOR, "a brand new password") and not store.verify(OPERATOR, PASSWORD)
    assert store.remove(OPERATOR) and not store.remove(OPERATOR) and store.list() == []


@pytest.mark.parametrize("name, password, reason", [
    ("admin", PASSWORD, "admin token's name"),
    ("Dana", PASSWORD, "lower-case"),
    ("a b", PASSWORD, "lower-case"),
    ("x" * 33, PASSWORD, "1 to 32"),
    (OPERATOR, "short", "12 to 200"),
])
def test_bad_accounts_are_refused(fake_redis, name: str, password: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AccountError, match=reason):
        OperatorStore(fake_redis).add(name, password, created_by="cli")
    assert not fake_redis.exists(OPERATORS_KEY)


def test_failed_sign_ins_are_counted_per_name_and_address_in_a_window(fake_redis) -> None:  # type: ignore[no-untyped-def]
    store = OperatorStore(fake_redis)
    assert [store.count_failure(OPERATOR, "203.0.113.7", 900) for _ in range(3)] == [1, 2, 3]
    assert store.failures(OPERATOR, "203.0.113.7") == 3
    assert store.failures(OPERATOR, "203.0.113.8") == 0 and store.failures("other", "203.0.113.7") == 0
    (key,) = fake_redis.scan_iter(match="console_signin:*")
    assert 890 < fake_redis.ttl(key) <= 900  # from the first failure, not pushed on by later ones
    assert "203.0.113" not in key and OPERATOR not in key  # no name or address in a key name
    store.clear_failures(OPERATOR, "203.0.113.7")
    assert store.failures(OPERATOR, "203.0.113.7") == 0


# -- the CLI --------------------------------------------------------------------------------
@pytest.fixture
def cli(redis_url: str, queue_redis_url: str, redis_client, tmp_path):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, **redis_env(redis_url, queue_redis_url))

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_cli(args, env, tmp_path, stdin)

    return run


@pytest.mark.integration
@pytest.mark.cluster
def test_operators_add_list_remove_and_sign_in(cli, console_app, redis_client) -> None:  # type: ignore[no-untyped-def]
    added = cli("operators", "add", OPERATOR, "--password-stdin", stdin=PASSWORD + "\n")
    assert added.returncode == 0 and f"added operator {OPERATOR}" in added.stdout, added.stderr
    assert PASSWORD not in added.stdout + added.stderr
    client = console_app.test_client()
    assert sign_in(client, OPERATOR, PASSWORD).status_code == 302
    listed = json.loads(cli("operators", "list", "--json").stdout)
    assert [(o["name"], o["created_by"]) for o in listed] == [(OPERATOR, "cli")]
    assert OPERATOR in cli("operators", "list").stdout
    assert cli("operators", "add", "admin", "--password-stdin", stdin=PASSWORD).returncode == 2
    assert cli("operators", "add", "kim", "--password-stdin", stdin="short\n").returncode == 2
    assert cli("operators", "add").returncode == 2  # a name is needed
    removed = cli("operators", "remove", OPERATOR)
    assert removed.returncode == 0 and f"removed operator {OPERATOR}" in removed.stdout
    assert client.get("/console/").status_code == 302  # the session ended with the account
    assert cli("operators", "remove", OPERATOR).returncode == 1


@pytest.mark.integration
def test_operators_add_asks_for_the_password_twice(services, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    typed = iter([PASSWORD, PASSWORD + "?"])
    monkeypatch.setattr(operator_commands.getpass, "getpass", lambda prompt="": next(typed))
    args = argparse.Namespace(action="add", name=OPERATOR, password_stdin=False, json=False)
    assert operator_commands.cmd_operators(services, args) == 1
    assert "the passwords differ" in capsys.readouterr().err and OperatorStore(services.redis).list() == []
    typed = iter([PASSWORD, PASSWORD])
    assert operator_commands.cmd_operators(services, args) == 0
    assert OperatorStore(services.redis).verify(OPERATOR, PASSWORD)
