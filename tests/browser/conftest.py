"""Browser fixtures: the app served over real HTTP on 127.0.0.1, and Debian's Chromium driven by
Playwright (launch with executable_path: Playwright's own browser download is never used).

Without /usr/bin/chromium (`apt-get install chromium`; .ci/run installs it) every browser test
skips with one line; the console's pages are also covered with Flask's test client.

Set CONSOLE_SHOTS to a directory (not in the repo, e.g. /tmp/console-shots) to have the tests
save a screenshot of each console page there, to look at.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any, Callable

import pytest
from werkzeug.serving import make_server

from bot import create_app
from tests.conftest import ACCOUNT
from tests.ops.console.support import SECRET, TOKEN

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
#: What the probe of this machine runs Chromium with: as root, no sandbox; nothing reaching out.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage", "--no-proxy-server",
]
#: How long a locator or an expect() waits by default: the pages answer in milliseconds, so a
#: miss fails in seconds, not Playwright's 30. The poll test waits longer where it means to.
WAIT_MS = 5_000

#: Reports every securitypolicyviolation event of every page to Python (init scripts and
#: bindings are not subject to the page's CSP, so a violation cannot hide its own report).
_REPORT_CSP = """
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolation(e.violatedDirective + " " + (e.blockedURI || "inline") + " at " + e.documentURI);
});
"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the browser tests, with one clear reason, where Chromium is not installed."""
    if os.path.exists(CHROMIUM):
        return
    skip = pytest.mark.skip(reason=f"no Chromium at {CHROMIUM}: apt-get install chromium to run the browser tests")
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the session, closed (with Playwright's driver) at its end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # a fresh temporary profile per launch
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def open_page(chromium: Any) -> Iterator[Callable[..., Any]]:
    """open_page(**context_options) -> a page in a fresh browser context (no cookies).

    Each page collects what went wrong on it: `page.errors` (uncaught JavaScript errors),
    `page.console_errors` (console messages of type error, CSP refusals and failed loads
    included) and `page.csp_violations` (securitypolicyviolation events)."""
    contexts: list[Any] = []

    def open_(**options: Any) -> Any:
        context = chromium.new_context(**options)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        violations: list[str] = []
        context.expose_function("__cspViolation", lambda report: violations.append(report))
        context.add_init_script(_REPORT_CSP)
        page = context.new_page()
        page.errors = []  # type: ignore[attr-defined]
        page.console_errors = []  # type: ignore[attr-defined]
        page.csp_violations = violations  # type: ignore[attr-defined]
        page.on("pageerror", lambda err: page.errors.append(str(err)))  # type: ignore[attr-defined]

        def console_message(message: Any) -> None:
            if message.type == "error":
                page.console_errors.append(message.text)  # type: ignore[attr-defined]

        page.on("console", console_message)
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture
def page(open_page: Callable[..., Any]) -> Any:
    """A fresh browser context (no cookies) and page, with the page's own CSP enforced."""
    return open_page()


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(app) -> the base URL of the app served over HTTP on 127.0.0.1 (stopped at teardown)."""
    servers: list[Any] = []

    def start(app: Any) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def console_app(make_settings, redis_client, model, twilio):  # type: ignore[no-untyped-def]
    """The app with the console on (the tests' admin token and secret), on the real Redis and
    the model stand-in, sending a person's replies to the Twilio stand-in; the handover page
    polls every second."""
    return create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                    TWILIO_API_BASE_URL=twilio.url, CONSOLE_POLL_S=1))


@pytest.fixture
def base(serve, console_app) -> str:  # type: ignore[no-untyped-def]
    """The base URL the console app is served at (http://127.0.0.1:<port>)."""
    return serve(console_app)
