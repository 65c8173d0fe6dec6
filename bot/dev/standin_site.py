"""A small stand-in website for `make run`'s tour and `eval knowledge`: the bakery's pages
(eval_data/knowledge/site/), under /site/, with a robots.txt that keeps /site/private/ out,
ETags (a conditional GET gets a 304) and nothing else (docs/knowledge.md).

    .venv/bin/whatsapp-bot kb add http://127.0.0.1:<stand-in port>/site/
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SITE_DIR = Path(__file__).resolve().parent / "eval_data" / "knowledge" / "site"
PREFIX = "/site/"
_TYPES = {".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8", ".xml": "application/xml"}


def site_file(path: str) -> Path | None:
    """Return the file a GET of the stand-in site reads (not necessarily one that exists), or
    None when the path is not the site's (the caller answers it)."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    if path == "/robots.txt":
        return SITE_DIR / "robots.txt"
    if path.startswith(PREFIX) or path == PREFIX.rstrip("/"):
        file = (SITE_DIR / path[len(PREFIX):]).resolve()
        return file / "index.html" if file.is_dir() else file
    return None


def send_site(handler: BaseHTTPRequestHandler) -> bool:
    """Answer a GET with the stand-in site when the path is its own; False otherwise."""
    file = site_file(handler.path)
    if file is None:
        return False
    if not file.is_file() or SITE_DIR.resolve() not in file.parents:
        send_missing(handler)
    else:
        send_page(handler, _TYPES.get(file.suffix, "application/octet-stream"), file.read_bytes())
    return True


def send_page(handler: BaseHTTPRequestHandler, content_type: str, body: bytes) -> None:
    """Answer a GET with a page and its ETag, or a 304 when the client holds that ETag (the
    stand-in site, and the sites the tests and benchmarks serve)."""
    etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
    if handler.headers.get("If-None-Match") == etag:
        _send(handler, 304, {"ETag": etag}, b"")
    else:
        _send(handler, 200, {"Content-Type": content_type, "ETag": etag}, body)


def send_missing(handler: BaseHTTPRequestHandler) -> None:
    """Answer a GET with a 404."""
    _send(handler, 404, {"Content-Type": "text/plain"}, b"not found\n")


def _send(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class SiteServer:
    """The stand-in site alone, on 127.0.0.1 (the eval's; `make run` serves it from the
    stand-in model's port)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                if not send_site(self):
                    send_missing(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{PREFIX}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
