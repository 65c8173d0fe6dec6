"""The knowledge base in Redis: documents, their chunks (and vectors), and one version.

Keys (bot/storage/keys.py, hash tag ``{kb}``, no TTL):
``knowledge:{kb}:meta`` hash ``version``, ``chunks``, ``bytes``;
``knowledge:{kb}:docs`` hash document id -> record JSON (DocRecord);
``knowledge:{kb}:chunks`` hash ``<id>#<n>`` -> ``{"t": text, "k": tokens}``;
``knowledge:{kb}:vectors`` hash ``<id>#<n>`` -> ``<model>|<base64 float32>``, one per model
(the ranking model's, then the gate model's, joined by a space; the model named with every
vector: vectors of two models are never compared).
Every change goes through one script (lua/kb_put.lua, lua/kb_remove.lua) that checks the
caps, writes everything or nothing, and moves the version on.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import KB_ANCHOR_PREFIX, KB_CHUNKS_KEY, KB_DOCS_KEY, KB_META_KEY, KB_VECTORS_KEY
from bot.storage.records import as_int, flat_to_dict, text
from bot.storage.scripts import Scripts

_KEYS = {"meta": KB_META_KEY, "docs": KB_DOCS_KEY, "chunks": KB_CHUNKS_KEY, "vectors": KB_VECTORS_KEY}


@dataclass(frozen=True)
class DocRecord:
    """One document as stored: where it came from and what it became."""

    id: str
    title: str
    source: str  # the file name it was added from ("" through the API without one)
    kind: str  # markdown, text, html, pdf
    language: str | None  # its stemming language; None: KNOWLEDGE_LANGUAGE, else none
    sha256: str  # of the source bytes: the same file added again is a no-op
    chunks: int
    bytes: int  # what it takes in Redis: record, chunks and vectors
    added_at: float
    updated_at: float
    embedding_model: str = ""  # the model its chunk vectors came from ("" for none)
    gate_model: str = ""  # the gate model's vectors beside them ("" for none; docs/semantic.md)

    def to_json(self) -> str:
        """Return the record as stored."""
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> DocRecord | None:
        """Read a stored record; None when it is unreadable."""
        try:
            data = json.loads(raw)
            return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})
        except (ValueError, TypeError, KeyError):
            return None

    def to_public(self) -> dict[str, Any]:
        """Return the record as the CLI, the admin API and the console show it."""
        return asdict(self)


@dataclass(frozen=True)
class StoredChunk:
    """One chunk of a stored document, with what retrieval needs to know of its document."""

    id: str  # "<document id>#<n>", n from 1
    doc_id: str
    title: str
    language: str | None
    text: str
    tokens: int
    vectors: dict[str, bytes] = field(default_factory=dict)  # by model, float32 native order; the ranking model's first

    @property
    def vector_model(self) -> str:
        """Return the model of the first vector (the ranking model's), "" without one."""
        return next(iter(self.vectors), "")

    @property
    def vector(self) -> bytes | None:
        """Return the first vector (the ranking model's), None without one."""
        return self.vectors.get(self.vector_model)


@dataclass(frozen=True)
class KnowledgeSnapshot:
    """The whole knowledge base at one version."""

    version: str
    docs: dict[str, DocRecord]
    chunks: list[StoredChunk]
    anchors: list[tuple[bytes, str]] = field(default_factory=list)  # the gate's baseline: (vector, model)


@dataclass(frozen=True)
class PutResult:
    """What adding a document did: stored, unchanged, too_many_chunks or too_many_bytes."""

    status: str
    version: str = ""
    total: int = 0  # the total the cap refused


def chunk_json(text_: str, tokens: int) -> str:
    """Return a chunk's stored form."""
    return json.dumps({"t": text_, "k": tokens}, ensure_ascii=False, separators=(",", ":"))


def vector_text(vector: bytes, model: str) -> str:
    """Return a vector's stored form: its model, then base64 (Lua scripts pass text, not bytes)."""
    return f"{model}|{base64.b64encode(vector).decode('ascii')}"


def vectors_text(vectors: dict[str, bytes]) -> str:
    """Return several models' vectors of one text as stored: the first is the ranking model's."""
    return " ".join(vector_text(vector, model) for model, vector in vectors.items())


def read_vector(raw: Any, default_model: str = "") -> tuple[bytes | None, str]:
    """Return a stored vector and its model (one stored bare, before models were named with
    each vector, takes its document's); (None, "") when unreadable."""
    if raw is None:
        return None, ""
    model, sep, body = text(raw).rpartition("|")
    try:
        return base64.b64decode(body, validate=True), model if sep else default_model
    except ValueError:
        return None, ""


def read_vectors(raw: Any, default_model: str = "") -> dict[str, bytes]:
    """Return every model's stored vector of one text, by model (the first one first)."""
    out: dict[str, bytes] = {}
    for part in text(raw).split(" ") if raw is not None else ():
        vector, model = read_vector(part, default_model)
        if vector is not None:
            out.setdefault(model, vector)
    return out


def _chunk_order(chunk_id: str) -> tuple[str, int]:
    doc, _, n = chunk_id.rpartition("#")
    return doc, int(n) if n.isdigit() else 0


class KnowledgeStore:
    """Read and change the knowledge base; Redis errors become StoreUnavailable."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.scripts = Scripts(client, "kb_put", "kb_remove", "kb_snapshot")

    def version(self) -> str:
        """Return the version ("0" before the first document)."""
        try:
            return text(self.client.hget(KB_META_KEY, "version")) or "0"
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def documents(self) -> dict[str, DocRecord]:
        """Return every document's record, by id."""
        try:
            raw = self.client.hgetall(KB_DOCS_KEY)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        docs = (DocRecord.from_json(value) for value in raw.values())
        return {doc.id: doc for doc in sorted((d for d in docs if d), key=lambda d: d.id)}

    def totals(self) -> dict[str, int]:
        """Return the version, the chunks and the bytes the knowledge base holds."""
        try:
            meta = {text(k): text(v) for k, v in self.client.hgetall(KB_META_KEY).items()}
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return {name: as_int(meta.get(name)) for name in ("version", "chunks", "bytes")}

    def document_chunks(self, doc: DocRecord) -> list[StoredChunk]:
        """Return one document's chunks, in order."""
        if not doc.chunks:
            return []
        ids = [f"{doc.id}#{n}" for n in range(1, doc.chunks + 1)]
        try:
            values = self.client.hmget(KB_CHUNKS_KEY, ids)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [c for c in (_chunk(i, v, doc) for i, v in zip(ids, values)) if c is not None]

    def put(
        self, doc: DocRecord, chunks: list[str], vectors: list[str] | None, *, max_chunks: int, max_bytes: int
    ) -> PutResult:
        """Add or replace a document with its chunks (chunk_json) and vectors (vector_text)."""
        status, value = self.scripts.run(
            "kb_put",
            _KEYS,
            {
                "id": doc.id, "doc": doc.to_json(), "sha": doc.sha256, "model": f"{doc.embedding_model}|{doc.gate_model}",
                "title": doc.title, "language": doc.language or "",
                "chunks": chunks, "vectors": vectors, "bytes": doc.bytes,
                "max_chunks": max_chunks, "max_bytes": max_bytes,
            },
        )
        status, value = text(status), text(value)
        if status in ("stored", "unchanged"):
            return PutResult(status, version=value)
        return PutResult(status, total=as_int(value))

    def anchors_model(self) -> str:
        """Return the models the gate's baseline passages were embedded with, joined by "+"
        ("" for none)."""
        try:
            raw = self.client.hget(KB_VECTORS_KEY, f"{KB_ANCHOR_PREFIX}1")
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return "+".join(read_vectors(raw)) if raw is not None else ""

    def put_anchors(self, vectors: list[str]) -> None:
        """Store the gate's baseline passages' vectors (vector_text), replacing any before;
        the next document's version move makes every index read them."""
        fields = {f"{KB_ANCHOR_PREFIX}{n}": v for n, v in enumerate(vectors, start=1)}
        try:
            self.client.hset(KB_VECTORS_KEY, mapping=fields)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def remove(self, doc_id: str) -> tuple[bool, str]:
        """Remove a document and its chunks; return whether it existed, and the version."""
        status, version = self.scripts.run("kb_remove", _KEYS, {"id": doc_id})
        return text(status) == "removed", text(version)

    def snapshot(self, vectors: bool = False) -> KnowledgeSnapshot:
        """Return every document and chunk at one version, in one round trip."""
        version, flat_docs, flat_chunks, flat_vectors = self.scripts.run("kb_snapshot", _KEYS, {"vectors": vectors})
        docs = {d.id: d for d in (DocRecord.from_json(v) for v in flat_to_dict(flat_docs).values()) if d}
        vecs = flat_to_dict(flat_vectors) if vectors else {}
        anchors = [(v, m) for k, raw in sorted(vecs.items()) if k.startswith(KB_ANCHOR_PREFIX)
                   for m, v in read_vectors(raw).items()]
        chunks: list[StoredChunk] = []
        for chunk_id, raw in sorted(flat_to_dict(flat_chunks).items(), key=lambda kv: _chunk_order(kv[0])):
            doc = docs.get(_chunk_order(chunk_id)[0])
            chunk = _chunk(chunk_id, raw, doc, vecs.get(chunk_id)) if doc else None
            if chunk is not None:
                chunks.append(chunk)
        return KnowledgeSnapshot(text(version) or "0", docs, chunks, [(v, m) for v, m in anchors if v is not None])


def _chunk(chunk_id: str, raw: Any, doc: DocRecord, vector: Any = None) -> StoredChunk | None:
    """Read a stored chunk; None when it is missing or unreadable."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        body, tokens = str(data["t"]), int(data["k"])
    except (ValueError, TypeError, KeyError):
        return None
    return StoredChunk(chunk_id, doc.id, doc.title, doc.language, body, tokens, read_vectors(vector, doc.embedding_model))
