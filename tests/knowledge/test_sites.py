"""The business's website as a source (bot/knowledge/sites.py, web_fetch.py), against a real
HTTP server on 127.0.0.1: a sitemap, a crawl from the root, robots.txt, conditional GETs (a
304 costs no embedding), a removed page leaving the base, a page over the cap stopped as it
arrives, and addresses that are never fetched (docs/knowledge.md)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import openai
import pytest

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

from bot.dev.standin_site import send_missing, send_page
from bot.knowledge.library import KnowledgeError, Library
from bot.knowledge.sites import Sites, page_links, sitemap_urls
from bot.knowledge.web_fetch import FetchError, WebFetcher, normalize, public_address
from bot.llm.embeddings import Embedder
from bot.llm.tokens import TokenCounter
from bot.storage.knowledge import KnowledgeStore
from bot.storage.sites import SiteStore

COUNTER = TokenCounter("gpt-4o-mini")
#: The huge page: far more than any socket buffer holds, so a reader that stops cuts the server off.
HUGE_PARTS = 2000
PUBLIC = "93.184.216.34"  # what the test resolver says shop.test is; the transport takes it to 127.0.0.1


def html(title: str, body: str, links: tuple[str, ...] = ()) -> bytes:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{body}</p>"
            f"<ul>{anchors}</ul></main></body></html>").encode()


class Site:
    """A small bakery website whose pages a test changes, and what it was asked."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {
            "/": ("text/html; charset=utf-8", html("Casa Lumi", "A bakery in Porto with two shops.",
                                                   ("/hours", "/news", "/private/prices", "/logo.png"))),
            "/hours": ("text/html", html("Opening hours", "Ribeira opens every day from 08:00 to 19:00.",
                                          ("/hours/holidays",))),
            "/hours/holidays": ("text/html", html("Holidays", "Both shops close on Christmas Day.")),
            "/news": ("text/html", html("News", "Our new shop in Matosinhos opens on 3 March 2027.")),
            "/private/prices": ("text/html", html("Staff prices", "Staff pay half price.")),
        }
        self.robots = "User-agent: *\nDisallow: /private/\n"
        self.sitemap: list[str] | None = None
        self.requests: list[tuple[str, str]] = []  # (path, If-None-Match)
        self.redirects: dict[str, str] = {}
        self.huge_sent = 0
        self.lock = threading.Lock()


@pytest.fixture
def site() -> Iterator[tuple[Site, int]]:
    state = Site()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            with state.lock:
                state.requests.append((path, self.headers.get("If-None-Match", "")))
            if path in state.redirects:
                self.send_response(302)
                self.send_header("Location", state.redirects[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path == "/robots.txt":
                body, kind = state.robots.encode(), "text/plain"
            elif path == "/sitemap.xml" and state.sitemap is not None:
                locs = "".join(f"<url><loc>http://shop.test{p}</loc></url>" for p in state.sitemap)
                body = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'.encode()
                kind = "application/xml"
            elif path == "/huge":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()  # no Content-Length: the cap must stop it as it arrives
                try:
                    for _ in range(HUGE_PARTS):
                        self.wfile.write(b"<p>" + b"x" * 16_000 + b"</p>")
                        state.huge_sent += 16_007
                except OSError:
                    pass
                return
            elif path in state.pages:
                kind, body = state.pages[path]
            else:
                send_missing(self)
                return
            send_page(self, kind, body)  # with its ETag, or a 304

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()


class ToLoopback(httpx.HTTPTransport):
    """Takes a connection to the public address the test resolver gave shop.test to the
    local server (the request, its Host header and its path unchanged)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == PUBLIC:
            request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        return super().handle_request(request)


def fetcher(port: int, **kwargs: Any) -> WebFetcher:
    def resolve(host: str, _port: int) -> list[str]:
        return {"shop.test": [PUBLIC], "intranet.test": ["10.1.2.3"]}.get(host) or ["127.0.0.1"]
    return WebFetcher(resolver=resolve, transport=ToLoopback(port), **kwargs)


@pytest.fixture
def sites(site, redis_client, settings, standin_server):  # type: ignore[no-untyped-def]
    """(Sites on shop.test, the library, the stand-in model that embeds and counts)."""
    state, port = site
    standin_server.reset()
    embedder = Embedder(openai.OpenAI(api_key="x", base_url=standin_server.url, max_retries=0), "standin-embedding")
    library = Library(KnowledgeStore(redis_client), COUNTER, settings, embedder)
    return Sites(SiteStore(redis_client), library, settings, fetcher(port, max_bytes=64 * 1024)), library, standin_server


def test_addresses_that_are_never_fetched() -> None:
    for address in ("127.0.0.1", "10.0.0.7", "192.168.1.1", "172.16.0.1", "169.254.169.254", "::1", "fe80::1",
                    "0.0.0.0", "100.64.0.1", "::ffff:127.0.0.1", "224.0.0.1"):
        assert not public_address(address), address
    assert public_address("93.184.216.34") and public_address("2606:2800:220:1:248:1893:25c8:1946")
    plain = WebFetcher()
    for url in ("http://127.0.0.1:9/", "http://localhost/", "http://169.254.169.254/latest/meta-data/",
                "http://[::1]/", "http://10.0.0.7/"):
        with pytest.raises(FetchError) as err:
            plain.check(url)
        assert err.value.reason == "private_address", url
    for url in ("ftp://shop.test/", "file:///etc/passwd", "http://user:pw@shop.test/", "javascript:alert(1)"):
        with pytest.raises(FetchError) as err:
            plain.check(url)
        assert err.value.reason == "bad_url", url
    assert normalize("HTTP://Shop.Test:80/a#frag") == "http://shop.test/a"


def test_a_redirect_to_a_private_address_is_refused(site) -> None:  # type: ignore[no-untyped-def]
    state, port = site
    state.redirects["/go"] = f"http://127.0.0.1:{port}/hours"
    state.redirects["/intranet"] = "http://intranet.test/"
    web = fetcher(port)
    assert web.get("http://shop.test/hours").status == 200  # the public site itself is read
    for path in ("/go", "/intranet"):
        with pytest.raises(FetchError) as err:
            web.get(f"http://shop.test{path}")
        assert err.value.reason == "private_address"
    assert ("/hours", "") in state.requests and len([p for p, _ in state.requests if p == "/hours"]) == 1
    state.redirects["/loop"] = "/loop"
    with pytest.raises(FetchError) as err:
        web.get("http://shop.test/loop")
    assert err.value.reason == "too_many_redirects"


def test_a_root_is_crawled_by_its_links_within_robots_and_depth(sites, site, settings) -> None:  # type: ignore[no-untyped-def]
    manager, library, _ = sites
    report = manager.add("http://shop.test/", language="en")
    sources = sorted(d.source for d in library.documents())
    assert sources == ["http://shop.test/", "http://shop.test/hours", "http://shop.test/hours/holidays",
                       "http://shop.test/news"]
    assert report.added == 4 and any("disallowed by robots.txt" in e for e in report.errors)
    assert not any(p.endswith("logo.png") for p, _ in site[0].requests)  # not a page: never asked for
    (record,) = manager.sites()
    assert record.mode == "crawl" and len(record.pages) == 4 and record.to_public()["pages"] == 4
    # one link less deep: the holidays page is two links from the root
    settings_one = settings.model_copy(update={"KB_CRAWL_MAX_DEPTH": 1})
    shallow = Sites(manager.store, library, settings_one, manager.fetcher)
    shallow.sync(manager.store.get(record.id))
    assert "http://shop.test/hours/holidays" not in {d.source for d in library.documents()}


def test_a_sitemap_names_the_pages_and_a_304_costs_no_embedding(sites, site) -> None:  # type: ignore[no-untyped-def]
    manager, library, model = sites
    state, _ = site
    state.sitemap = ["/hours", "/news"]
    manager.add("http://shop.test/sitemap.xml", language="en")
    assert sorted(d.source for d in library.documents()) == ["http://shop.test/hours", "http://shop.test/news"]
    embedded = len(model.embedded())
    assert embedded > 0
    state.requests.clear()
    report = manager.sync(manager.sites()[0])
    assert report.unchanged == 2 and report.added == report.changed == 0
    assert len(model.embedded()) == embedded  # nothing was embedded again
    assert all(etag for path, etag in state.requests if path in ("/hours", "/news"))  # conditional GETs
    # a changed page is embedded again; a page gone from the site leaves the base
    state.pages["/news"] = ("text/html", html("News", "Our Matosinhos shop now opens on 10 March 2027."))
    del state.pages["/hours"]
    report = manager.sync(manager.sites()[0])
    assert (report.changed, report.removed) == (1, 1)
    assert [d.source for d in library.documents()] == ["http://shop.test/news"]
    assert len(model.embedded()) > embedded


def test_a_page_over_the_cap_is_stopped_as_it_arrives(sites, site) -> None:  # type: ignore[no-untyped-def]
    manager, library, _ = sites
    state, _ = site
    report = manager.add("http://shop.test/huge")
    assert report.failed == 1 and "too_large" in report.errors[0] and library.documents() == []
    assert state.huge_sent < HUGE_PARTS * 16_007  # the server was cut off long before the end (32 MB)


def test_an_address_the_operator_gives_is_checked_before_anything(sites) -> None:  # type: ignore[no-untyped-def]
    manager, _, _ = sites
    with pytest.raises(KnowledgeError, match="private_address"):
        manager.add("http://intranet.test/")
    assert manager.sites() == []


def test_links_and_sitemaps_are_read_leniently() -> None:
    links = page_links("http://shop.test/a/", b'<a href="b">x</a><a href="/c#top">y</a><a href="mailto:x@y">m</a>'
                       b'<a href="http://other.test/">o</a><a href="/img.JPG">i</a><a href="b">again</a>')
    assert links == ["http://shop.test/a/b", "http://shop.test/c"]
    index = (b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>http://shop.test/s1.xml'
             b'</loc></sitemap></sitemapindex>')
    assert sitemap_urls(index) == ([], ["http://shop.test/s1.xml"])
    assert sitemap_urls(b"<not xml") == ([], [])


def test_the_sync_runs_as_a_job_and_one_periodic_sync_is_scheduled(site, make_settings, monkeypatch,
                                                                   run_worker, redis_client) -> None:  # type: ignore[no-untyped-def]
    # a site on the business's own network (here 127.0.0.1), allowed by KB_ALLOW_PRIVATE_URLS
    from rq import Queue
    from rq.registry import ScheduledJobRegistry

    from bot.jobs.queue import FACTS_QUEUE
    from bot.jobs.sites import schedule_sync, sync_now
    from bot.services import build_services
    from tests.conftest import give_workers

    state, port = site
    settings = make_settings(KB_ALLOW_PRIVATE_URLS=True, EMBEDDING_MODEL="off", KB_SYNC_INTERVAL=3600)
    give_workers(settings, monkeypatch)
    services = build_services(settings, role="cli")
    assert services.sites is not None
    services.sites.add(f"http://127.0.0.1:{port}/news")
    assert [d.title for d in services.library.documents()] == ["News"]
    queue_client = services.jobs.connection
    assert schedule_sync(queue_client, services.sites.store, 3600)
    assert not schedule_sync(queue_client, services.sites.store, 3600)  # one at a time
    scheduled = ScheduledJobRegistry(queue=Queue(FACTS_QUEUE, connection=queue_client))
    assert len(scheduled.get_job_ids()) == 1
    state.pages["/news"] = ("text/html", html("News", "The Matosinhos shop opens on 10 March 2027."))
    sync_now(queue_client)
    run_worker(FACTS_QUEUE)
    (doc,) = services.library.documents()
    assert "10 March" in services.library.document(doc.id)[1][0].text
    assert len(scheduled.get_job_ids()) == 1  # still the one
    plain = build_services(make_settings(EMBEDDING_MODEL="off"), role="cli")
    assert plain.sites is not None
    with pytest.raises(KnowledgeError, match="private_address"):  # without the setting: refused
        plain.sites.add(f"http://127.0.0.1:{port}/hours")


@pytest.mark.cluster
def test_the_site_records_and_the_sync_notes_on_any_topology(redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot.storage.keys import KB_SITES_KEY
    from bot.storage.sites import PageRecord, SiteRecord

    store = SiteStore(redis_client)
    site = SiteRecord("shop-test", "https://shop.test/", "crawl", "pt", added_at=1.0,
                      pages={"https://shop.test/": PageRecord("casa-lumi", '"e1"', "Tue, 01 Dec 2026 10:00:00 GMT",
                                                              ["https://shop.test/hours"])})
    store.put(site)
    assert store.get("shop-test") == site and list(store.all()) == ["shop-test"]
    redis_client.hset(KB_SITES_KEY, "broken", "{not json")  # an unreadable record is skipped, never fatal
    assert list(store.all()) == ["shop-test"] and store.get("nope") is None
    assert store.lock_sync("a", 60) and not store.lock_sync("b", 60)
    store.unlock_sync("b")  # not the holder: the lock stays
    assert not store.lock_sync("c", 60)
    store.unlock_sync("a")
    assert store.lock_sync("c", 60)
    assert store.claim_next(2e9, 60) and not store.claim_next(2e9, 60)
    store.release_next()
    assert store.claim_next(2e9, 60)
    assert store.remove("shop-test") and not store.remove("shop-test") and store.get("shop-test") is None


def test_removing_a_site_removes_its_pages_documents(sites, site) -> None:  # type: ignore[no-untyped-def]
    manager, library, _ = sites
    site[0].sitemap = ["/hours", "/news"]
    manager.add("http://shop.test/sitemap.xml")
    manager.library.add(b"# FAQ\n\nWe deliver to Gaia.", source="faq.md")  # a file stays
    (record,) = manager.sites()
    assert manager.remove(record.id) and not manager.remove(record.id)
    assert [d.source for d in library.documents()] == ["faq.md"] and manager.sites() == []


def test_a_page_says_its_own_language() -> None:
    from bot.knowledge.sites import page_language

    assert page_language(b'<html lang="pt-PT"><body>Ol\xc3\xa1</body></html>') == "pt"
    assert page_language(b'<html lang="ES"><body>Hola</body></html>') == "es"
    assert page_language(b"<html><body>hi</body></html>") is None
    assert page_language(b'<html lang="xx"><body>?</body></html>') is None  # not one we stem
