"""The business's websites as knowledge-base sources, in Redis (docs/knowledge.md).

``knowledge:{kb}:sites`` hash: site id -> record JSON (SiteRecord): where the site starts,
how its pages are found (one page, a sitemap, or links from its root), each page's
document and validators (ETag, Last-Modified, the links it held), the last sync and its
errors. The pages' text lives in the knowledge base as documents like any other, with the
page's URL as their source. No TTL: a site lives until an operator removes it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import KB_SITES_KEY, KB_SYNC_LOCK_KEY, KB_SYNC_NEXT_KEY
from bot.storage.records import text


@dataclass
class PageRecord:
    """One page of a site: its document, and what a conditional GET and the crawl need."""

    doc_id: str = ""
    etag: str = ""
    last_modified: str = ""
    links: list[str] = field(default_factory=list)  # same-origin links, for a crawl on a 304


@dataclass
class SiteRecord:
    """A website as a source."""

    id: str
    url: str  # where it starts: a page, a sitemap or the site's root
    mode: str  # page, sitemap or crawl
    language: str | None = None
    added_at: float = 0.0
    synced_at: float = 0.0
    sync_seconds: float = 0.0
    pages: dict[str, PageRecord] = field(default_factory=dict)  # by URL
    errors: list[str] = field(default_factory=list)  # the last sync's, "<url>: <reason>"
    last: dict[str, int] = field(default_factory=dict)  # the last sync: added, changed, unchanged, removed, failed

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> SiteRecord | None:
        """Read a stored record; None when it is unreadable."""
        try:
            data = json.loads(raw)
            pages = {url: PageRecord(**page) for url, page in data.pop("pages", {}).items()}
            return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__}, pages=pages)
        except (ValueError, TypeError):
            return None

    def to_public(self) -> dict[str, Any]:
        """The record as the CLI, the admin API and the console show it (no validators)."""
        return {"id": self.id, "url": self.url, "mode": self.mode, "language": self.language,
                "pages": len(self.pages), "added_at": self.added_at, "synced_at": self.synced_at,
                "sync_seconds": round(self.sync_seconds, 1), "errors": list(self.errors), "last": dict(self.last)}


class SiteStore:
    """Read and write the site records; Redis errors become StoreUnavailable."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def all(self) -> dict[str, SiteRecord]:
        try:
            raw = self.client.hgetall(KB_SITES_KEY)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        sites = (SiteRecord.from_json(v) for v in raw.values())
        return {s.id: s for s in sorted((s for s in sites if s), key=lambda s: s.id)}

    def get(self, site_id: str) -> SiteRecord | None:
        try:
            raw = self.client.hget(KB_SITES_KEY, site_id)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return SiteRecord.from_json(raw) if raw is not None else None

    def put(self, site: SiteRecord) -> None:
        try:
            self.client.hset(KB_SITES_KEY, site.id, site.to_json())
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def remove(self, site_id: str) -> bool:
        try:
            return bool(self.client.hdel(KB_SITES_KEY, site_id))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def lock_sync(self, holder: str, ttl_s: int) -> bool:
        """Take the one-sync-at-a-time lock; False when another sync holds it."""
        try:
            return bool(self.client.set(KB_SYNC_LOCK_KEY, holder, nx=True, ex=ttl_s))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def unlock_sync(self, holder: str) -> None:
        try:
            if text(self.client.get(KB_SYNC_LOCK_KEY)) == holder:
                self.client.delete(KB_SYNC_LOCK_KEY)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def claim_next(self, due: float, ttl_s: int) -> bool:
        """Note that the next periodic sync is scheduled (False: one already is)."""
        try:
            return bool(self.client.set(KB_SYNC_NEXT_KEY, str(int(due)), nx=True, ex=ttl_s))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def release_next(self) -> None:
        try:
            self.client.delete(KB_SYNC_NEXT_KEY)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
