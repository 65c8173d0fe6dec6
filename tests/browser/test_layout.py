"""Every console page fits a phone (390 px) and a laptop (1280 px): nothing scrolls sideways,
no card is wider than itself, and the top bar's links stay on its dark background. A
screenshot of each page at each width is taken (into the test's folder, and $CONSOLE_SHOTS
when set)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from bot.storage.keys import FACTS_PREFIX, user_key
from tests.browser.pages import sign_in, trouble, user_writes
from tests.conftest import USER, fact

pytestmark = pytest.mark.integration

HOURS = b"# Opening hours\n\nWe open at 09:00 on weekdays and at 10:00 on Sunday, and close at 18:00.\n"
#: What overflows: the page itself, or any card or table wider than the box it sits in.
OVERFLOW = """() => {
  const out = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) out.push(`page ${doc.scrollWidth} > ${window.innerWidth}`);
  for (const el of document.querySelectorAll('.card, .tile, table, .topbar, form')) {
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${el.tagName.toLowerCase()}.${el.className} ${el.scrollWidth} > ${el.clientWidth}`);
  }
  return out;
}"""
#: The top bar's links must sit inside its dark background (they are white on it).
BAR = """() => {
  const bar = document.querySelector('.topbar').getBoundingClientRect();
  return [...document.querySelectorAll('.topbar a, .topbar button, .topbar span')]
    .map(el => [el.textContent.trim(), el.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && (r.bottom > bar.bottom + 0.5 || r.right > bar.right + 0.5 || r.left < bar.left - 0.5))
    .map(([text]) => text);
}"""


#: Headers and short cells (numbers, dates, kinds) whose text runs over more than one line:
#: broken inside a word ("LANGUAG E"). Cells hidden (a phone's table head) do not count.
BROKEN = """() => [...document.querySelectorAll(
    'table.data thead th, table.data td.num, table.data td.nowrap, table.data td.short')]
  .filter(el => !(el.closest('thead') && getComputedStyle(el.closest('thead')).position === 'absolute'))
  .filter(el => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const tops = new Set();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('.visually-hidden') || !node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) if (r.width > 0 && r.height > 0) tops.add(Math.round(r.top));
    }
    return tops.size > 1;
  })
  .map(el => el.textContent.trim())"""
#: Cells of a table that would stand in a phone's stacked row without their column's name.
UNLABELLED = """() => [...document.querySelectorAll('table.data td')]
  .filter(td => !td.classList.contains('actions') && !td.hasAttribute('data-label') && td.textContent.trim())
  .map(td => td.textContent.trim())"""


def pages(base: str) -> dict[str, str]:
    """The console's pages, by name."""
    return {
        "overview": f"{base}/console/",
        "users": f"{base}/console/users",
        "user": f"{base}/console/users/{USER}",
        "queues": f"{base}/console/queues",
        "knowledge": f"{base}/console/knowledge",
        "search": f"{base}/console/knowledge?q=When+do+you+open+on+Sunday%3F#search",
        "document": f"{base}/console/knowledge/opening-hours",
        "tools": f"{base}/console/tools",
    }


@pytest.mark.parametrize("width", [390, 1280])
def test_every_page_fits_without_sideways_scroll(open_page, base, console_app, redis_client, model, width: int,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    user_writes(base, "Hi, I'm Ana from Porto and I'm allergic to peanuts; which tram goes to the castle?")
    redis_client.hset(user_key(FACTS_PREFIX, USER), mapping={
        f.key: f.to_json() for f in (fact("name", "Ana"), fact("allergies", "peanuts", category="health"),
                                     fact("favourite_long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis"))})
    console_app.extensions["bot.services"].library.add(HOURS, source="opening-hours.md", language="en", actor="test")
    from bot.storage.sites import PageRecord, SiteRecord, SiteStore

    SiteStore(redis_client).put(SiteRecord(  # a website with a long address and an error
        "casa-lumi-example", "https://www.casa-lumi-padaria-e-pastelaria.example/pt/lojas-e-horarios/", "crawl",
        synced_at=1_700_000_000.0, pages={"https://www.casa-lumi-padaria-e-pastelaria.example/pt/": PageRecord("x")},
        errors=["https://www.casa-lumi-padaria-e-pastelaria.example/pt/privado/: disallowed by robots.txt"],
        last={"added": 1, "changed": 0, "removed": 0}))
    page = open_page(viewport={"width": width, "height": 800})
    sign_in(page, base)
    for name, url in pages(base).items():
        page.goto(url)
        expect(page.get_by_role("navigation", name="Console")).to_be_visible()
        page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
        assert page.evaluate(OVERFLOW) == [], name
        assert page.evaluate(BAR) == [], name
        assert page.evaluate(BROKEN) == [], name
        assert page.evaluate(UNLABELLED) == [], name
    assert trouble(page) == []
    assert len(list(tmp_path.glob("*.png"))) == len(pages(base))


def test_tables_become_labelled_rows_on_a_phone(open_page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "Hello there, a question about the weekend opening hours please")
    redis_client.hset(user_key(FACTS_PREFIX, USER), "city", fact("city", "Porto", category="location").to_json())
    page: Any = open_page(viewport={"width": 390, "height": 800})
    sign_in(page, base)
    page.goto(f"{base}/console/users/{USER}")
    row = page.get_by_role("row").filter(has_text="Porto")
    label = row.get_by_role("cell", name="location").evaluate("el => getComputedStyle(el, '::before').content")
    assert label == '"Category"'
    delete = row.get_by_role("button", name="Delete")
    delete.scroll_into_view_if_needed()
    expect(delete).to_be_in_viewport(ratio=1)  # whole, not off the right edge
