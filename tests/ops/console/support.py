"""Signing in to the console from tests: the Flask test client here; browser tests fill the
same form (labels "Name" and "Password or admin token", button "Sign in")."""

from __future__ import annotations

import re
from typing import Any

from bot.storage.operators import OperatorStore

#: ADMIN_TOKEN of the console tests: with the name left empty it signs in as "admin".
TOKEN = "console-admin-token-0123456789"
#: CONSOLE_SECRET of the console tests.
SECRET = "console-secret-0123456789abcdef"
#: An operator account the tests add with add_operator().
OPERATOR, PASSWORD = "dana", "correct horse battery"

_TOKEN_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def add_operator(redis_client: Any, name: str = OPERATOR, password: str = PASSWORD) -> None:
    """Create an operator account, as `whatsapp-bot operators add` does."""
    OperatorStore(redis_client).add(name, password, created_by="test")


def csrf_token(client: Any, path: str = "/console/signin") -> str:
    """Return the CSRF token a console form carries (from the page at `path`)."""
    page = client.get(path, follow_redirects=True).get_data(as_text=True)
    found = _TOKEN_FIELD.search(page)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def sign_in(client: Any, name: str = "", password: str = TOKEN) -> Any:
    """Sign in through the form (the admin token with no name, by default); return the response."""
    token = csrf_token(client, "/console/signin")
    return client.post("/console/signin", data={"name": name, "password": password, "csrf_token": token})


def post(client: Any, path: str, data: dict[str, str] | None = None, page: str = "/console/") -> Any:
    """POST a console form with a valid CSRF token (taken from `page`)."""
    return client.post(path, data={**(data or {}), "csrf_token": csrf_token(client, page)})


def say(app: Any, body: str, user: str = "+14155550100", **extra: str) -> Any:
    """Post a message to the app's webhook, signed as Twilio signs it; return the response."""
    from tests.conftest import inbound_form, sign

    form = inbound_form(body, user, **extra)
    return app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})


def failing_job(user: str, token: str) -> None:
    """An RQ job that fails, naming the user in its error (the queues page masks it)."""
    raise ValueError(f"cannot summarize {user}")
