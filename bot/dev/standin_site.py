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


def site_response(path: str, if_none_match: str = "") -> tuple[int, dict[str, str], bytes] | None:
    """Return (status, headers, body) for a GET of the stand-in site, or None when the path
    is not the site's (the caller answers it)."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    if path == "/robots.txt":
        file = SITE_DIR / "robots.txt"
    elif path.startswith(PREFIX) or path == PREFIX.rstrip("/"):
        file = (SITE_DIR / path[len(PREFIX):]).resolve()
        if file.is_dir():
            file = file / "index.html"
    else:
        return None
    if not file.is_file() or SITE_DIR.resolve() not in file.parents:
        return 404, {"Content-Type": "text/plain"}, b"not found\n"
    body = file.read_bytes()
    etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
    if if_none_match == etag:
        return 304, {"ETag": etag}, b""
    return 200, {"Content-Type": _TYPES.get(file.suffix, "application/octet-stream"), "ETag": etag}, body


def send_site(handler: BaseHTTPRequestHandler) -> bool:
    """Answer a GET with the stand-in site when the path is its own; False otherwise."""
    answer = site_response(handler.path, handler.headers.get("If-None-Match", ""))
    if answer is None:
        return False
    status, headers, body = answer
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    return True


class SiteServer:
    """The stand-in site alone, on 127.0.0.1 (the eval's; `make run` serves it from the
    stand-in model's port)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                if not send_site(self):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

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
