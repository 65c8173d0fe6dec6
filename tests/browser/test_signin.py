"""Signing in to the console in a browser: a console page asks for it first, a wrong token is
refused (and counted in Redis), an operator added with the store signs in by name, and
signing out ends the session."""

from __future__ import annotations

import pytest

from bot.storage.operators import OperatorStore
from tests.browser.pages import Console, SignInPage, shoot, trouble
from tests.ops.console.support import OPERATOR, PASSWORD, TOKEN, add_operator

pytestmark = pytest.mark.integration


def test_a_console_page_asks_to_sign_in_and_then_opens(page, base) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/console/users")
    signin = SignInPage(page, base)
    signin.expect_shown()
    assert page.url == f"{base}/console/signin?next=/console/users"
    shoot(page, "signin")

    signin.sign_in(password=TOKEN)

    assert page.url == f"{base}/console/users"
    signin.expect_signed_in_as("admin")
    assert trouble(page) == []


def test_a_wrong_token_is_refused_and_gives_no_session(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    signin = SignInPage(page, base).open()

    signin.sign_in(password=TOKEN + "-wrong")

    signin.expect_refused("Wrong name or password.")
    assert OperatorStore(redis_client).failures("admin", "127.0.0.1") == 1
    page.goto(f"{base}/console/")
    signin.expect_shown()  # still nobody signed in
    assert page.get_by_role("navigation", name="Console").count() == 0
    assert trouble(page, answered=401) == []  # the refusal is the one failed load


def test_an_operator_signs_in_by_name_and_signs_out(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)  # as `whatsapp-bot operators add dana` does
    signin = SignInPage(page, base).open()

    signin.sign_in(OPERATOR, PASSWORD)
    console = Console(page, base)
    console.expect_signed_in_as(OPERATOR)
    console.sign_out()

    signin.expect_shown()
    console.flash("You are signed out.")
    page.goto(f"{base}/console/queues")
    signin.expect_shown()
    assert trouble(page) == []
