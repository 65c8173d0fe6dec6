"""The business's website as a source of the knowledge base (docs/knowledge.md).

`kb add https://…` takes a page, a sitemap (sitemap.xml, or a sitemap index) or a site's
root (or a folder of it: an address ending in "/"). A root is read through the sitemaps
its robots.txt names, else by following its links, breadth first, KB_CRAWL_MAX_DEPTH links
deep, within the root (or the folder); a site brings at most
KB_CRAWL_MAX_PAGES pages. robots.txt is respected for our user agent (a robots.txt that
cannot be read for a server error means no page this time, as Google does). Every page
goes through the same extraction (trafilatura for HTML, pypdf for PDF), chunking and both
models as a file, as its own document, with its URL as the source.

A sync fetches every page again with a conditional GET (its ETag and Last-Modified): a 304
costs nothing more, and a page whose bytes did not change is not chunked or embedded again
(Library.add compares its hash first). A page gone from the site (404 or 410, or no longer
in its sitemap or reachable by its links) leaves the knowledge base. Fetching is
web_fetch.py's: public addresses only, checked at every hop, capped, text, HTML and PDF.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
import xml.etree.ElementTree as ElementTree
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Iterator
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import structlog

from bot.config import Settings
from bot.config.knowledge import LANGUAGES
from bot.knowledge.library import KnowledgeError, Library, check_language, unused_slug
from bot.knowledge.web_fetch import USER_AGENT, FetchError, Page, WebFetcher, normalize, split_url
from bot.storage.sites import PageRecord, SiteRecord, SiteStore

log = structlog.get_logger(__name__)

#: Sitemaps read for one site (an index's children included), and the bytes of each.
MAX_SITEMAPS = 20
SITEMAP_MAX_BYTES = 5 * 1024 * 1024
#: Errors kept with a site (the last sync's), and links kept per page (for a crawl on a 304).
MAX_ERRORS = 20
MAX_LINKS = 200
#: How long one sync may hold the lock (a crashed sync frees it after this).
SYNC_LOCK_S = 3600
PAGE_KINDS = frozenset({"html", "text", "markdown", "pdf"})
_SKIP_SUFFIXES = re.compile(r"\.(?:jpe?g|png|gif|webp|svg|ico|css|js|mjs|json|zip|gz|mp3|mp4|ogg|webm|woff2?)$", re.I)


class _Links(HTMLParser):
    """The href of every <a> of an HTML page, and its <html lang>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.lang = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "html" and not self.lang:
            self.lang = (dict(attrs).get("lang") or "").split("-", 1)[0].strip().lower()
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def read_html(data: bytes) -> _Links:
    """Return what an HTML page links to and the language it says it is in."""
    parser = _Links()
    try:
        parser.feed(data.decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 (html.parser is lenient; a page never stops a sync)
        pass
    return parser


def page_language(data: bytes) -> str | None:
    """Return the language an HTML page declares (<html lang="pt-PT"> -> "pt"), when it is
    one we stem; None otherwise."""
    return stemmed(read_html(data).lang)


def stemmed(lang: str) -> str | None:
    """Return a declared language when it is one we stem, else None."""
    return lang if lang in LANGUAGES else None


def page_links(page_url: str, data: bytes) -> list[str]:
    """Return the page's same-origin http(s) links, normalized, in order, each once."""
    return same_origin_links(page_url, read_html(data).hrefs)


def same_origin_links(page_url: str, hrefs: list[str]) -> list[str]:
    """Return a page's links on its own origin, resolved against it and normalized, each once
    (not mail, phone or script links, nor images, styles or archives)."""
    origin = split_url(page_url)
    out: list[str] = []
    for href in hrefs:
        if href.startswith(("mailto:", "tel:", "javascript:", "#")):
            continue
        try:
            url = normalize(urljoin(page_url, href.strip()))
            if split_url(url) != origin or _SKIP_SUFFIXES.search(urlsplit(url).path):
                continue
        except FetchError:
            continue
        if url not in out:
            out.append(url)
    return out[:MAX_LINKS]


def sitemap_urls(data: bytes) -> tuple[list[str], list[str]]:
    """Return a sitemap's page URLs and, for a sitemap index, its child sitemaps."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return [], []
    locs = [el.text.strip() for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "loc" and el.text]
    if root.tag.rsplit("}", 1)[-1] == "sitemapindex":
        return [], locs
    return locs, []


@dataclass
class SyncReport:
    """What one sync of one site did."""

    site: SiteRecord
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    unread: set[str] = field(default_factory=set)  # pages that could not be read: kept as they were

    def to_public(self) -> dict[str, Any]:
        return {"site": self.site.id, "url": self.site.url, "pages": len(self.site.pages), "added": self.added,
                "changed": self.changed, "unchanged": self.unchanged, "removed": self.removed,
                "failed": self.failed, "errors": self.errors}


class Sites:
    """Add, sync and remove the business's websites, through the library."""

    def __init__(self, store: SiteStore, library: Library, settings: Settings,
                 fetcher: WebFetcher | None = None) -> None:
        self.store = store
        self.library = library
        self.settings = settings
        self._fetcher = fetcher

    @property
    def fetcher(self) -> WebFetcher:
        """The web client, built at the first fetch (most processes never fetch a page)."""
        if self._fetcher is None:
            self._fetcher = WebFetcher(allow_private=self.settings.KB_ALLOW_PRIVATE_URLS,
                                       max_bytes=self.settings.KB_CRAWL_MAX_BYTES)
        return self._fetcher

    def sites(self) -> list[SiteRecord]:
        return list(self.store.all().values())

    def add(self, url: str, *, language: str | None = None, actor: str = "cli") -> SyncReport:
        """Add a site (a page, a sitemap or a root) and read it now; the same URL again syncs it."""
        try:
            start = normalize(url)
            self.fetcher.check(start)
        except FetchError as err:
            raise KnowledgeError(f"{url[:200]}: {err}") from None
        language = check_language(language)
        sites = self.store.all()
        existing = next((s for s in sites.values() if s.url == start), None)
        if existing is not None:
            return self.sync(existing, actor=actor)
        path = urlsplit(start).path
        mode = "sitemap" if path.lower().endswith(".xml") else "crawl" if path.endswith("/") else "page"
        site_id = unused_slug(urlsplit(start).hostname or "site", sites)
        site = SiteRecord(site_id, start, mode, language, added_at=time.time())
        log.info("audit.kb_site_added", actor=actor, site=site_id, mode=mode)
        return self.sync(site, actor=actor)

    def remove(self, site_id: str, actor: str = "cli") -> bool:
        """Remove a site and every document its pages became."""
        site = self.store.get(site_id)
        if site is None:
            return False
        for page in site.pages.values():
            if page.doc_id:
                self.library.remove(page.doc_id, actor=actor)
        self.store.remove(site_id)
        log.info("audit.kb_site_removed", actor=actor, site=site_id, pages=len(site.pages))
        return True

    @contextmanager
    def _sync_lock(self, actor: str) -> Iterator[bool]:
        """Hold the one-sync-at-a-time lock of the whole deployment; yield whether it was free."""
        holder = f"{actor}:{time.time()}"
        if not self.store.lock_sync(holder, SYNC_LOCK_S):
            yield False
            return
        try:
            yield True
        finally:
            self.store.unlock_sync(holder)

    def sync_all(self, actor: str = "scheduler") -> list[SyncReport]:
        """Sync every site, one sync at a time on the whole deployment (a second waits its turn:
        it returns nothing)."""
        with self._sync_lock(actor) as held:
            if not held:
                log.info("kb.sync_skipped", reason="another sync is running")
                return []
            return [self._sync(site, actor) for site in self.sites()]

    def sync(self, site: SiteRecord, *, actor: str = "cli") -> SyncReport:
        """Read a site's pages again and bring the knowledge base in line with them."""
        with self._sync_lock(actor) as held:
            if not held:
                raise KnowledgeError("another sync is running; try again when it ends")
            return self._sync(site, actor)

    def _sync(self, site: SiteRecord, actor: str) -> SyncReport:
        """Sync one site, the lock held."""
        started = time.monotonic()
        report = SyncReport(site)
        robots = self._robots(site.url, report)
        seen: dict[str, PageRecord] = {}
        if robots is not None:
            if site.mode == "crawl":
                root = urlsplit(site.url).path == "/"  # a folder's crawl stays in it: no site-wide sitemap
                sitemaps = [normalize(u) for u in robots.site_maps() or [] if root and self._same_origin(site.url, u)]
                if sitemaps:
                    self._from_sitemaps(site, sitemaps, robots, seen, report)
                else:
                    self._crawl(site, robots, seen, report)
            elif site.mode == "sitemap":
                self._from_sitemaps(site, [site.url], robots, seen, report)
            else:
                self._read_page(site, site.url, robots, seen, report)
        for url, page in site.pages.items():
            if url not in seen and page.doc_id:
                if robots is None or url in report.unread:  # unread this time: kept as it was
                    seen[url] = page
                    continue
                self.library.remove(page.doc_id, actor=actor)
                report.removed += 1
        site.pages = seen
        site.synced_at = time.time()
        site.sync_seconds = time.monotonic() - started
        site.errors = report.errors[:MAX_ERRORS]
        site.last = {k: getattr(report, k) for k in ("added", "changed", "unchanged", "removed", "failed")}
        self.store.put(site)
        log.info("kb.site_synced", actor=actor, site=site.id, pages=len(seen), seconds=round(site.sync_seconds, 1),
                 **site.last)
        return report

    # -- discovery -----------------------------------------------------------------------

    @staticmethod
    def _same_origin(start: str, url: str) -> bool:
        try:
            return split_url(url) == split_url(start)
        except FetchError:
            return False

    def _robots(self, start: str, report: SyncReport) -> RobotFileParser | None:
        """Return the origin's robots.txt rules (none: every page allowed); None when it could
        not be read for a server error or the site is unreachable: no page is read this time."""
        scheme, host, port = split_url(start)
        origin = normalize(f"{scheme}://{host}:{port}/")
        parser = RobotFileParser()
        try:
            page = self.fetcher.get(urljoin(origin, "/robots.txt"), max_bytes=512 * 1024,
                                    accept=frozenset({"text", "html", "markdown"}))
            parser.parse(page.data.decode("utf-8", errors="replace").splitlines())
        except FetchError as err:
            if err.reason in ("gone", "not_readable") or (err.reason == "http_status" and err.detail.startswith("4")):
                parser.parse([])  # no robots.txt: everything is allowed
            else:
                report.errors.append(f"{origin}robots.txt: {err}")
                report.failed += 1
                return None
        return parser

    def _allowed(self, robots: RobotFileParser, url: str, report: SyncReport) -> bool:
        if robots.can_fetch(USER_AGENT, url):
            return True
        report.errors.append(f"{url}: disallowed by robots.txt")
        return False

    def _from_sitemaps(self, site: SiteRecord, sitemaps: list[str], robots: RobotFileParser,
                       seen: dict[str, PageRecord], report: SyncReport) -> None:
        queue, done, pages = deque(sitemaps), 0, []
        while queue and done < MAX_SITEMAPS:
            url = queue.popleft()
            done += 1
            try:
                page = self.fetcher.get(url, max_bytes=SITEMAP_MAX_BYTES, accept=frozenset({"xml", "text"}))
            except FetchError as err:
                report.errors.append(f"{url}: {err}")
                report.failed += 1
                continue
            found, children = sitemap_urls(page.data)
            queue.extend(normalize(c) for c in children if self._same_origin(site.url, c))
            for loc in found:
                try:
                    loc = normalize(loc)
                except FetchError:
                    continue
                if self._same_origin(site.url, loc) and loc not in pages:
                    pages.append(loc)
        for url in pages:
            if self._full(site, seen, report):
                break
            self._read_page(site, url, robots, seen, report)

    def _full(self, site: SiteRecord, seen: dict[str, PageRecord], report: SyncReport) -> bool:
        """True, and said in the report, when the site has brought KB_CRAWL_MAX_PAGES pages."""
        cap = self.settings.KB_CRAWL_MAX_PAGES
        if len(seen) < cap:
            return False
        report.errors.append(f"{site.url}: more than KB_CRAWL_MAX_PAGES ({cap}) pages; the rest were left out")
        return True

    def _crawl(self, site: SiteRecord, robots: RobotFileParser, seen: dict[str, PageRecord],
               report: SyncReport) -> None:
        queue: deque[tuple[str, int]] = deque([(site.url, 0)])
        queued = {site.url}
        while queue:
            url, depth = queue.popleft()
            if self._full(site, seen, report):
                break
            record = self._read_page(site, url, robots, seen, report)
            if record is None or depth >= self.settings.KB_CRAWL_MAX_DEPTH:
                continue
            for link in record.links:
                if link not in queued and link.startswith(site.url):  # the root's, or the folder's, pages
                    queued.add(link)
                    queue.append((link, depth + 1))

    # -- one page ------------------------------------------------------------------------

    def _read_page(self, site: SiteRecord, url: str, robots: RobotFileParser, seen: dict[str, PageRecord],
                   report: SyncReport) -> PageRecord | None:
        """Fetch one page (conditionally) and add, replace or keep its document; return its
        record, or None when it could not be read."""
        if url in seen or not self._allowed(robots, url, report):
            return seen.get(url)
        before = site.pages.get(url)
        try:
            page = self.fetcher.get(url, etag=before.etag if before else "",
                                    last_modified=before.last_modified if before else "", accept=PAGE_KINDS)
        except FetchError as err:
            if err.reason != "gone":  # a page gone from the site leaves the knowledge base
                report.errors.append(f"{url}: {err}")
                report.failed += 1
                report.unread.add(url)
            return None
        if page.status == 304 and before is not None and before.doc_id:
            report.unchanged += 1
            seen[url] = before
            return before
        record = self._store(site, url, page, before, report)
        if record is not None:
            seen[url] = record
        return record

    def _store(self, site: SiteRecord, url: str, page: Page, before: PageRecord | None,
               report: SyncReport) -> PageRecord | None:
        html = read_html(page.data) if page.kind == "html" else None
        links = same_origin_links(page.url, html.hrefs) if html else []
        # the site's language when the operator gave one, else the page's own <html lang>
        language = site.language or (stemmed(html.lang) if html else None)
        try:
            result = self.library.add(page.data, source=url, language=language, actor=f"site:{site.id}",
                                      kind=page.kind)
        except KnowledgeError as err:
            report.errors.append(f"{url}: {str(err).removeprefix(url + ': ')}")
            report.failed += 1
            report.unread.add(url)
            return None
        if result.status == "added":
            report.added += 1
        elif result.status == "replaced":
            report.changed += 1
        else:
            report.unchanged += 1
        return PageRecord(result.doc.id, page.etag, page.last_modified, links)

