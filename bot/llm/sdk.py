"""The openai SDK's clients, built on first use.

Importing the SDK costs about 1.7 s of CPU (`python -c "import openai"`, 2026-11-28), and
most CLI commands never call a model (`users`, `inspect`, `--help`: docs/operating.md):
`lazy_client` returns a stand-in that builds the real client, with our deadline transport
(bot/llm/transport.py), at its first attribute access. Code that catches the SDK's errors
imports `openai` where it catches them: by then the client has been used, so the SDK is
loaded.

A long-lived process that answers messages builds them all at its start instead
(`build_all`): gunicorn's workers before their first request, and RQ's worker before its
first fork. Otherwise every RQ job's work horse would import the SDK afresh, about 2 s of
CPU per job (docs/semantic.md, Speed).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

#: Every lazy client made in this process, for build_all.
_CLIENTS: "weakref.WeakSet[LazyClient]" = weakref.WeakSet()


class LazyClient:
    """An openai.OpenAI built on first use from a factory; every attribute is the client's."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._client: Any = None
        self._lock = threading.Lock()
        _CLIENTS.add(self)

    @property
    def built(self) -> Any:
        """Return the real client, building it once (threads may race to the first call)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build()
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.built, name)


def build_all() -> int:
    """Build every lazy client this process has made (no request is sent: connections are
    opened by whoever calls first, so a forked child opens its own); return how many."""
    clients = list(_CLIENTS)
    for client in clients:
        client.built  # noqa: B018 (building is the point)
    return len(clients)


def lazy_client(*, api_key: str, base_url: str | None, timeout: float, max_retries: int = 0,
                max_connections: int | None = None, max_keepalive: int | None = None,
                nodelay: bool = False) -> Any:
    """Return an openai.OpenAI for these options, built at its first use (see the module)."""

    def build() -> Any:
        import openai

        from bot.llm.transport import deadline_transport

        transport = deadline_transport(max_connections, max_keepalive, nodelay)
        return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries,
                             http_client=openai.DefaultHttpxClient(transport=transport))

    return LazyClient(build)
