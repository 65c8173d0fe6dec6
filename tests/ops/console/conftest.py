"""Fixtures of the console tests: an app with ADMIN_TOKEN set, its test client, signed in."""

from __future__ import annotations

from typing import Any

import pytest

from bot import create_app
from tests.ops.console.support import SECRET, TOKEN, sign_in


@pytest.fixture
def console_settings(make_settings, request):  # type: ignore[no-untyped-def]
    """Settings with the console on (ADMIN_TOKEN and CONSOLE_SECRET), and any a test gives
    through indirect parametrization."""
    return make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, **getattr(request, "param", {}))


@pytest.fixture
def console_app(console_settings, redis_client, model):  # type: ignore[no-untyped-def]
    """The app with the console mounted, on the real Redis."""
    return create_app(console_settings)


@pytest.fixture
def console(console_app) -> Any:  # type: ignore[no-untyped-def]
    """A test client signed in as admin (the admin token, name left empty)."""
    client = console_app.test_client()
    response = sign_in(client)
    assert response.status_code == 302, response.get_data(as_text=True)
    return client


@pytest.fixture
def anonymous(console_app) -> Any:  # type: ignore[no-untyped-def]
    """A test client that has not signed in."""
    return console_app.test_client()
