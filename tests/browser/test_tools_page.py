"""The console's Tools page and the user page's tool calls (docs/tools.md): a user asks for free
slots and a booking through the served webhook (the stand-in model calls the example clinic
API), then an operator sees the tools, their health, the recent calls and the change that
waits for the user's yes, at a phone's width and a laptop's."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from bot import create_app
from bot.dev.clinic_api import serve as serve_clinic
from bot.dev.embedded import free_port
from tests.browser.pages import shoot, sign_in, trouble, user_writes
from tests.browser.test_layout import OVERFLOW, UNLABELLED
from tests.conftest import ACCOUNT, USER
from tests.ops.console.support import SECRET, TOKEN

pytestmark = pytest.mark.integration

DAY = "2030-01-08"


@pytest.fixture
def clinic_url() -> Iterator[str]:
    port = free_port()
    server = serve_clinic("127.0.0.1", port, today=date(2030, 1, 7))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tools_base(serve, make_settings, redis_client, model, twilio, clinic_url) -> str:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                   TWILIO_API_BASE_URL=twilio.url, TOOLS_OPENAPI=f"{clinic_url}/openapi.json",
                                   TOOLS_BASE_URL=clinic_url))
    return serve(app)  # type: ignore[no-any-return]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_tools_page_shows_each_tool_its_health_and_the_recent_calls(  # type: ignore[no-untyped-def]
        open_page, tools_base: str, width: int, tmp_path: Path) -> None:
    user_writes(tools_base, f"Há vaga no dia {DAY}?")
    assert "Posso avançar?" in user_writes(tools_base, f"Marca-me para {DAY} às 10h")
    page = open_page(viewport={"width": width, "height": 800})
    sign_in(page, tools_base)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Tools").click()
    expect(page.get_by_role("heading", name="Tools", exact=True)).to_be_visible()
    tools = page.get_by_role("table").first
    for name in ("list_free_slots", "list_my_appointments", "book_appointment", "cancel_appointment"):
        expect(tools.get_by_text(name, exact=True)).to_be_visible()
    free = tools.get_by_role("row").filter(has_text="list_free_slots")
    expect(free.get_by_text("healthy")).to_be_visible()
    expect(tools.get_by_role("row").filter(has_text="book_appointment").get_by_text("write, asks first")).to_be_visible()
    calls = page.get_by_role("table").nth(1)
    expect(calls.get_by_role("row").filter(has_text="book_appointment").get_by_text("proposed")).to_be_visible()
    expect(calls.get_by_text(f"day: {DAY}").first).to_be_visible()
    _check(page, tmp_path, f"tools-{width}")
    calls.get_by_role("link", name=USER).first.click()
    expect(page.get_by_text("a change waits for the user's yes")).to_be_visible()
    section = page.locator("#tools")
    expect(section.get_by_text("waiting for the user's yes")).to_be_visible()
    expect(section.get_by_text("Book an appointment (day: 2030-01-08; time: 10:00; service: checkup)")).to_be_visible()
    _check(page, tmp_path, f"user-tools-{width}")
    assert trouble(page) == []


def _check(page: Any, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    shoot(page, name)
    assert page.evaluate(OVERFLOW) == [], name
    assert page.evaluate(UNLABELLED) == [], name


def test_without_tools_the_page_says_how_to_add_them(open_page, base) -> None:  # type: ignore[no-untyped-def]
    page = open_page()
    sign_in(page, base)
    page.goto(f"{base}/console/tools")
    expect(page.get_by_text("Set TOOLS_OPENAPI")).to_be_visible()
