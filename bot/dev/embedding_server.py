"""The local embedding model's server (bot/llm/local_embeddings.py), started for the tests,
the evals and the benchmarks as the Procfile's `embed` process starts it for `make run` and
production: on loopback, its threads pinned.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from urllib.error import URLError
from urllib.request import urlopen

from bot.dev.embedded import free_port
from bot.dev.processes import die_with_parent, stop_process, tagged_env

#: How long the server may take to answer /health (it maps the model: well under a second).
READY_S = 30.0


def server_command(port: int, threads: int = 1) -> list[str]:
    """Return the command that serves the local model on 127.0.0.1:port."""
    return [sys.executable, "-m", "bot.llm.local_embeddings", "--host", "127.0.0.1", "--port", str(port),
            "--threads", str(threads), "--default-type", "query"]


@dataclass
class EmbeddingServer:
    """A running local embedding server."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        """Return the OpenAI base URL of the server."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """Stop the server."""
        stop_process(self.process)


def healthy(port: int, timeout_s: float = 0.5) -> bool:
    """Return whether the server on this port answers /health."""
    try:
        with urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout_s) as response:  # noqa: S310 (loopback)
            return json.loads(response.read()).get("status") == "ok"
    except (URLError, OSError, ValueError):
        return False


def start_embedding_server(threads: int = 1, port: int | None = None) -> EmbeddingServer:
    """Start the local model's server and wait until it answers."""
    port = port or free_port()
    env = tagged_env()
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    process = subprocess.Popen(server_command(port, threads), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read().decode(errors="replace")[-400:] if process.stderr else ""
            raise RuntimeError(f"the embedding server exited ({process.returncode}): {error}")
        if healthy(port):
            return EmbeddingServer(process, port)
        time.sleep(0.05)
    stop_process(process)
    raise RuntimeError(f"the embedding server did not answer within {READY_S:g}s")
