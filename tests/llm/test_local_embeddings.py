"""The `embed` process (bot/llm/local_embeddings.py): both local models under their own names
through the OpenAI embeddings API, a message's request before background ones, and a cache
of short texts (docs/semantic.md)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from bot.config.embeddings import GATE_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL
from bot.llm.local_embeddings import BACKGROUND_SLICE, Model, Server, TurnLock, VectorCache


def wait_until(condition, ceiling_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Wait for a condition (a ceiling only a hang reaches)."""
    deadline = time.monotonic() + ceiling_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_message_goes_before_the_background_requests_waiting_with_it() -> None:
    lock, order = TurnLock(), []
    lock.acquire(urgent=False)  # a chunk batch is being embedded

    def take(name: str, urgent: bool) -> None:
        lock.acquire(urgent)
        order.append(name)
        lock.release()

    background = threading.Thread(target=take, args=("facts", False))
    background.start()
    wait_until(lambda: lock.waiting == 1)
    message = threading.Thread(target=take, args=("message", True))
    message.start()
    wait_until(lambda: lock.waiting == 2)
    lock.release()
    background.join(30)
    message.join(30)
    assert order == ["message", "facts"]


class Counting:
    """A model that records each batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts: list[str], query: bool) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[len(t), float(query), 1.0] for t in texts], dtype=np.float32)


def test_background_texts_go_a_few_at_a_time_and_short_texts_come_from_the_cache() -> None:
    model = Counting()
    server = Server({"m": Model("m", model.encode, lambda text, query: 1)})
    texts = [f"chunk {n}" for n in range(10)]
    vectors, tokens = server.embed(server.models["m"], texts, query=False, urgent=False)
    assert all(len(b) == BACKGROUND_SLICE for b in model.batches[:-1]) and sum(map(len, model.batches)) == 10
    assert vectors.shape == (10, 3) and tokens == 10
    model.batches.clear()
    again, tokens = server.embed(server.models["m"], ["obrigado", "chunk 3"], query=False, urgent=True)
    assert model.batches == [["obrigado"]] and tokens == 1  # "chunk 3" was cached
    assert again[1].tolist() == vectors[3].tolist()
    server.embed(server.models["m"], ["obrigado"], query=True, urgent=True)  # a query is another vector
    assert model.batches[-1] == ["obrigado"]


def test_the_cache_forgets_the_least_recently_used_and_keeps_no_long_text() -> None:
    cache = VectorCache(size=2)
    one = np.zeros(2, dtype=np.float32)
    cache.put(("m", True, "a"), one)
    cache.put(("m", True, "b"), one)
    assert cache.get(("m", True, "a")) is not None
    cache.put(("m", True, "c"), one)
    assert cache.get(("m", True, "b")) is None and cache.get(("m", True, "a")) is not None
    cache.put(("m", True, "x" * 1000), one)
    assert cache.peek(("m", True, "x" * 1000)) is None


def post(url: str, body: dict) -> tuple[int, dict]:  # type: ignore[type-arg]
    request = urllib.request.Request(f"{url}/embeddings", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.integration
@pytest.mark.embeddings
def test_the_process_serves_both_models_under_their_names(embedding_server) -> None:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(f"{embedding_server.url}/models", timeout=30) as response:  # noqa: S310
        names = [m["id"] for m in json.loads(response.read())["data"]]
    assert names == [LOCAL_EMBEDDING_MODEL, GATE_EMBEDDING_MODEL]
    status, e5 = post(embedding_server.url, {"model": LOCAL_EMBEDDING_MODEL, "input": "olá", "input_type": "query"})
    assert status == 200 and e5["model"] == LOCAL_EMBEDDING_MODEL and len(e5["data"][0]["embedding"]) == 384
    status, use = post(embedding_server.url, {"model": GATE_EMBEDDING_MODEL, "input": ["olá", "hola"],
                                              "priority": "background"})
    assert status == 200 and use["model"] == GATE_EMBEDDING_MODEL and len(use["data"][1]["embedding"]) == 512
    assert post(embedding_server.url, {"model": "text-embedding-3-small", "input": "x"})[0] == 404
    assert post(embedding_server.url, {"model": GATE_EMBEDDING_MODEL, "input": []})[0] == 400
    assert post(embedding_server.url, {"model": GATE_EMBEDDING_MODEL, "input": [1, 2]})[0] == 400
