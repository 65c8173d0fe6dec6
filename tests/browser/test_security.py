"""What protects the console, seen from a browser: a POST without its CSRF token is refused
with the session cookie sent and changes nothing; every page carries the Content-Security-Policy
and works under it (its stylesheet applies, no inline script or style is refused, no error)."""

from __future__ import annotations


import pytest
from playwright.sync_api import expect

from bot.storage.keys import FACTS_PREFIX, user_key
from tests.browser.pages import Console, SignInPage, UserPage, shoot, sign_in, stored_about, trouble, user_writes
from tests.conftest import USER, fact

pytestmark = pytest.mark.integration

#: The policy docs/console.md promises on every console response.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
#: The top bar's background in console.css: shown only if the stylesheet loaded under the CSP.
TOPBAR_BACKGROUND = "rgb(20, 33, 61)"


def test_a_post_without_its_csrf_token_is_refused_and_changes_nothing(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "Please remember that my dog is called Rex.")
    redis_client.hset(user_key(FACTS_PREFIX, USER), "dog_name", fact("dog_name", "Rex").to_json())
    before = stored_about(redis_client)
    sign_in(page, base)
    UserPage(page, base).open()
    user_page = f"{base}/console/users/{USER}"

    # With the browser's session cookie (a 302 to sign-in would mean it was not sent).
    for action, form in (("erase", {"confirm": USER}), ("reset", {}), ("facts/delete", {"key": "dog_name"}),
                         ("handover/take", {})):
        refused = page.request.post(f"{user_page}/{action}", form=form, max_redirects=0)
        assert refused.status == 400, (action, refused.status)
    # And from the page's own script, as a forged form would post.
    status = page.evaluate("""async (url) => {
        const body = new URLSearchParams({confirm: "%s"});
        return (await fetch(url, {method: "POST", body, redirect: "manual"})).status;
    }""" % USER, f"{user_page}/erase")
    assert status == 400

    assert stored_about(redis_client) == before
    assert trouble(page, answered=400) == []  # the refused fetch is the one failed load


def test_every_console_page_carries_the_csp_and_works_under_it(page, base, model) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "Which tram goes to the castle?")
    console = Console(page, base)

    signin_page = page.goto(f"{base}/console/signin")
    assert signin_page.headers["content-security-policy"] == CSP
    SignInPage(page, base).sign_in()
    console.expect_signed_in_as("admin")

    for path, heading, shot in (("/console/", "Overview", "overview"), ("/console/users", "Users", None),
                                (f"/console/users/{USER}", USER, None), ("/console/queues", "Queues", "queues")):
        response = page.goto(f"{base}{path}")
        headers = response.headers
        assert headers["content-security-policy"] == CSP, path
        assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store", path
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        assert page.locator("header").evaluate("el => getComputedStyle(el).backgroundColor") == TOPBAR_BACKGROUND
        if shot:
            shoot(page, shot)
    missing = page.goto(f"{base}/console/nothing-here")
    assert missing.status == 404 and missing.headers["content-security-policy"] == CSP

    assert trouble(page, answered=404) == []  # nothing refused by the CSP, no script error
