"""A website of 200 pages as a knowledge-base source: how long `kb add` takes to read,
chunk and embed it (both local models, one thread each, as the Procfile's `embed` process
runs them), and what a sync that finds nothing changed costs (conditional GETs: no embedding
call). The site is served on 127.0.0.1 (KB_ALLOW_PRIVATE_URLS), its pages the bakery's
documents' paragraphs, each page different. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_site.py [--pages 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bot  # noqa: E402,F401 - first: one BLAS thread, as the bot runs (bot/__init__.py)

from bot.config import load_settings  # noqa: E402
from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.dev.embedding_server import start_embedding_server  # noqa: E402
from bot.dev.knowledge_evaluation import DATA_DIR  # noqa: E402
from bot.dev.standin_site import send_missing, send_page  # noqa: E402
from bot.services import build_services  # noqa: E402


def paragraphs() -> list[str]:
    """The bakery's documents' paragraphs (Markdown ones), to fill the pages."""
    out = []
    for file in sorted(DATA_DIR.glob("*.md")):
        out += [p.strip() for p in file.read_text(encoding="utf-8").split("\n\n") if len(p.strip()) > 80]
    return out


def serve(pages: int) -> tuple[ThreadingHTTPServer, list[int]]:
    """Serve a site: an index linking to `pages` - 1 pages, each three paragraphs and its number."""
    texts = paragraphs()
    hits = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            hits[0] += 1
            if self.path == "/robots.txt":
                body, kind = b"User-agent: *\nAllow: /\n", "text/plain"
            elif self.path == "/":
                links = "".join(f'<li><a href="/p/{n}">Page {n}</a></li>' for n in range(1, pages))
                body, kind = f"<html><head><title>Casa Lumi</title></head><body><ul>{links}</ul></body></html>".encode(), \
                    "text/html"
            elif self.path.startswith("/p/") and self.path[3:].isdigit() and 0 < int(self.path[3:]) < pages:
                n = int(self.path[3:])
                body_text = "".join(f"<p>{texts[(n * 3 + i) % len(texts)]} (page {n})</p>" for i in range(3))
                body, kind = f"<html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1>{body_text}" \
                             f"</main></body></html>".encode(), "text/html"
            else:
                send_missing(self)
                return
            send_page(self, kind, body)  # with its ETag, or a 304

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()
    embed = start_embedding_server(threads=1)
    redis_server = start_embedded_redis(Path(tempfile.mkdtemp(prefix="bench-site-")) / "kb.db")
    site, hits = serve(args.pages)
    try:
        settings = load_settings(env_files=False, need=(), REDIS_URL=redis_server.url, EMBEDDING_BASE_URL=embed.url,
                                 KB_ALLOW_PRIVATE_URLS=True, KB_CRAWL_MAX_PAGES=args.pages)
        services = build_services(settings, role="cli")
        assert services.sites is not None
        url = f"http://127.0.0.1:{site.server_address[1]}/"
        started = time.perf_counter()
        report = services.sites.add(url)
        took = time.perf_counter() - started
        chunks = services.knowledge.totals()["chunks"]
        print(f"kb add of a {args.pages}-page site: {len(report.site.pages)} pages, {chunks} chunks, {took:.1f} s "
              f"({took / max(1, len(report.site.pages)) * 1000:.0f} ms a page; both models, one thread each)")
        before_hits = hits[0]
        started = time.perf_counter()
        report = services.sites.sync(services.sites.sites()[0])
        took = time.perf_counter() - started
        print(f"a sync that finds nothing changed: {took:.2f} s, {hits[0] - before_hits} requests (conditional), "
              f"{report.unchanged} unchanged, {report.added + report.changed} re-embedded")
    finally:
        site.shutdown()
        redis_server.stop()
        embed.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
