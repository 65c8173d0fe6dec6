"""`make run`'s console: on by default on loopback, with a development operator.

Only when the web binds 127.0.0.1, no ADMIN_TOKEN is set and no operator other than the
development one exists: an admin token, a console secret and the operator `dev` with a
password are generated once, kept in .run/console.env (mode 600), and reused at every start,
so a restart keeps the sign-in working (the embedded Redis keeps its data in .run/ too).
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from pathlib import Path

from dotenv import dotenv_values

from bot.storage.connection import make_redis, probe
from bot.storage.operators import OperatorStore

#: The development operator's name.
DEV_OPERATOR = "dev"
#: Its password's letters: nothing a terminal or a form could take for an option or a quote.
ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class DevConsole:
    """The settings that turn the console on, and who signs in."""

    settings: dict[str, str]  # ADMIN_TOKEN, CONSOLE_SECRET
    operator: str
    password: str


def dev_console(env: dict[str, str], run_dir: Path) -> DevConsole | None:
    """Return the development console's settings and operator, creating them once; None when
    the console is the operator's business (bound beyond loopback, ADMIN_TOKEN set, or real
    operators exist)."""
    if env.get("HOST") != "127.0.0.1" or env.get("ADMIN_TOKEN"):
        return None
    found = probe(env["REDIS_URL"])
    store = OperatorStore(make_redis(env["REDIS_URL"], cluster=bool(found and found.cluster)))
    if any(op.name != DEV_OPERATOR for op in store.list()):
        return None
    path = run_dir / "console.env"
    kept = {k: v for k, v in dotenv_values(path).items() if v} if path.exists() else {}
    if not {"ADMIN_TOKEN", "CONSOLE_SECRET", "DEV_PASSWORD"} <= set(kept):
        kept = {"ADMIN_TOKEN": secrets.token_urlsafe(24), "CONSOLE_SECRET": secrets.token_urlsafe(32),
                "DEV_PASSWORD": "".join(secrets.choice(ALPHABET) for _ in range(16))}
        path.write_text("".join(f"{k}={v}\n" for k, v in kept.items()))
        path.chmod(0o600)
    if not store.verify(DEV_OPERATOR, kept["DEV_PASSWORD"]):
        store.add(DEV_OPERATOR, kept["DEV_PASSWORD"], created_by="make run")
    return DevConsole({"ADMIN_TOKEN": kept["ADMIN_TOKEN"], "CONSOLE_SECRET": kept["CONSOLE_SECRET"]},
                      DEV_OPERATOR, kept["DEV_PASSWORD"])
