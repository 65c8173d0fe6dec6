"""Documents in, chunks out: what `kb add`, `kb remove` and their admin and console forms do.

A document is read (extract.py), chunked (chunking.py), embedded when EMBEDDING_MODEL is set
(once, here, never on the message path) and written in one script that checks the caps
(bot/storage/knowledge.py). The same file added again (by content hash) is a no-op; a file
with the path or the title of a stored document replaces it. Every change moves the
knowledge base's version on, and each web process rebuilds its index at its next message.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

import structlog

from bot.config import Settings
from bot.config.knowledge import LANGUAGES
from bot.exceptions import BotError, LLMUnavailable
from bot.llm.anchors import ANCHORS, anchor_vectors
from bot.knowledge.chunking import chunk_document
from bot.knowledge.extract import ExtractionError, extract, kind_of
from bot.llm.embeddings import Embedder
from bot.llm.tokens import TokenCounter
from bot.storage.knowledge import DocRecord, KnowledgeStore, StoredChunk, chunk_json, vectors_text

log = structlog.get_logger(__name__)

#: All a document's chunk embeddings may take when it is added (batches, retries included).
EMBED_DEADLINE_S = 120.0
_SLUG = re.compile(r"[^a-z0-9]+")


class KnowledgeError(BotError):
    """A document the knowledge base refuses; the message says why, for the operator."""


@dataclass(frozen=True)
class AddResult:
    """What adding one file did: added, replaced or unchanged."""

    status: str
    doc: DocRecord

    def to_public(self) -> dict[str, object]:
        """Return the result as the CLI and the admin API show it."""
        return {"status": self.status, **self.doc.to_public()}


def slug(title: str) -> str:
    """Return a document id from its title: lower-case ASCII words joined by dashes."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return _SLUG.sub("-", ascii_title.lower()).strip("-")[:40].strip("-") or "doc"


def unused_slug(text: str, taken: Iterable[str]) -> str:
    """Return the slug of a text that no id in `taken` has: "casa-lumi", else "casa-lumi-2"…"""
    taken = set(taken)
    base = slug(text)
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def title_from(filename: str) -> str:
    """Return a title from a file name: "opening-hours.md" -> "Opening hours"."""
    stem = Path(filename).stem.replace("_", " ").replace("-", " ").strip()
    return (stem[:1].upper() + stem[1:]) if stem else "Document"


def check_language(language: str | None) -> str | None:
    """Return a document's language code, or codes ("en,pt,es" for a price list that names
    each product in three languages), or raise KnowledgeError for one we cannot stem."""
    if language is None or not language.strip():
        return None
    codes = list(dict.fromkeys(code.strip().lower() for code in language.split(",") if code.strip()))
    unknown = [code for code in codes if code not in LANGUAGES]
    if unknown or not codes:
        raise KnowledgeError(f"language {language!r}: use one of {', '.join(sorted(LANGUAGES))}, "
                             "or several joined by commas (en,pt,es)")
    return ",".join(codes)


def stored_size(record: DocRecord, chunks: list[str], vectors: list[str] | None) -> int:
    """Return what a document takes in Redis: its record, its chunks and their vectors."""
    size = len(record.to_json().encode()) + 16 + sum(len(c.encode()) + len(record.id) + 6 for c in chunks)
    return size + sum(len(v) + len(record.id) + 6 for v in vectors or [])


class Library:
    """Add, replace, list and remove the knowledge base's documents."""

    def __init__(
        self, store: KnowledgeStore, counter: TokenCounter, settings: Settings, embedder: Embedder | None = None,
        gate: Embedder | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.settings = settings
        self.embedder = embedder
        self.gate = gate if embedder is not None else None  # the gate model's vectors go beside the ranking model's

    @property
    def models(self) -> tuple[str, str]:
        """Return the ranking and the gate model a document's vectors come from now."""
        return (self.embedder.model if self.embedder else "", self.gate.model if self.gate else "")

    def documents(self) -> list[DocRecord]:
        """Return every document, by id."""
        return list(self.store.documents().values())

    def document(self, doc_id: str) -> tuple[DocRecord, list[StoredChunk]]:
        """Return one document and its chunks, or raise KnowledgeError."""
        doc = self.store.documents().get(doc_id)
        if doc is None:
            raise KnowledgeError(f"no document {doc_id!r} (see `kb list`)")
        return doc, self.store.document_chunks(doc)

    def remove(self, doc_id: str, actor: str = "cli") -> bool:
        """Remove a document; return whether it existed."""
        existed, version = self.store.remove(doc_id)
        log.info("audit.kb_removed", actor=actor, doc=doc_id, existed=existed, version=version)
        return existed

    def add_paths(self, paths: list[Path], *, title: str | None = None, language: str | None = None,
                  actor: str = "cli") -> list[AddResult]:
        """Add files, and the readable files of folders (sorted, recursively); a title
        applies only to a single file."""
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files += sorted(p for p in path.rglob("*") if p.is_file() and kind_of(p.name) is not None)
            elif path.is_file():
                files.append(path)
            else:
                raise KnowledgeError(f"{path}: no such file or folder")
        if title is not None and len(files) != 1:
            raise KnowledgeError("--title names one document: give a single file")
        results = []
        for file in files:
            size = file.stat().st_size
            self._check_size(file.name, size)
            results.append(self.add(file.read_bytes(), source=str(file), title=title, language=language, actor=actor))
        return results

    def _check_size(self, name: str, size: int) -> None:
        cap = self.settings.KNOWLEDGE_MAX_DOC_BYTES
        if size > cap:
            raise KnowledgeError(f"{name}: {size:,} bytes is over KNOWLEDGE_MAX_DOC_BYTES ({cap:,}); split it")

    def add(self, data: bytes, *, source: str, title: str | None = None, language: str | None = None,
            actor: str = "cli", kind: str | None = None) -> AddResult:
        """Add one document from its bytes (source: the path or file name it came from, or a
        web page's URL, whose kind comes from its Content-Type). Nothing is written unless all
        of it fits the caps."""
        web = "://" in source
        name = source if web else Path(source).name
        self._check_size(name, len(data))
        kind = kind or kind_of(name)
        if kind is None:
            raise KnowledgeError(f"{name}: only Markdown (.md), text (.txt), HTML (.html) and PDF (.pdf) are read")
        language = check_language(language)
        try:
            extracted = extract(data, kind)
        except ExtractionError as err:
            raise KnowledgeError(f"{name}: {err}") from err
        title = (title or extracted.title or title_from(name)).strip()[:120]
        chunks = chunk_document(title, extracted.text, self.counter)
        if not chunks:
            raise KnowledgeError(f"{name}: no text to keep")
        cap = self.settings.KNOWLEDGE_MAX_DOC_CHUNKS
        if len(chunks) > cap:
            raise KnowledgeError(f"{name}: {len(chunks):,} chunks is over KNOWLEDGE_MAX_DOC_CHUNKS ({cap:,}); split it")
        stored_docs = self.store.documents()
        existing = self._existing(stored_docs, source, title)
        doc_id = existing.id if existing else unused_slug(title, stored_docs)
        if language is None and existing is not None:
            language = existing.language  # re-adding without --language keeps the document's
        sha = hashlib.sha256(data).hexdigest()
        model = self.models[0]
        if existing and existing.sha256 == sha and (existing.embedding_model, existing.gate_model) == self.models \
                and existing.title == title and existing.language == language:
            return AddResult("unchanged", existing)
        stored = [chunk_json(c.text, c.tokens) for c in chunks]
        vectors, gate_model = self._embed(name, [c.text for c in chunks])
        if vectors is None:
            model = ""  # no vectors: a later add or `kb reembed` embeds it
        else:
            self._ensure_anchors()
        now = time.time()
        record = DocRecord(
            id=doc_id, title=title, source=source, kind=kind, language=language, sha256=sha, chunks=len(chunks),
            bytes=0, added_at=existing.added_at if existing else now, updated_at=now, embedding_model=model,
            gate_model=gate_model,
        )
        size = stored_size(record, stored, vectors)
        record = replace(record, bytes=size)
        result = self.store.put(record, stored, vectors, max_chunks=self.settings.KNOWLEDGE_MAX_CHUNKS,
                                max_bytes=self.settings.KNOWLEDGE_MAX_BYTES)
        if result.status == "too_many_chunks":
            raise KnowledgeError(f"{name}: the knowledge base would hold {result.total:,} chunks, over "
                                 f"KNOWLEDGE_MAX_CHUNKS ({self.settings.KNOWLEDGE_MAX_CHUNKS:,}); nothing was changed")
        if result.status == "too_many_bytes":
            raise KnowledgeError(f"{name}: the knowledge base would take {result.total:,} bytes, over "
                                 f"KNOWLEDGE_MAX_BYTES ({self.settings.KNOWLEDGE_MAX_BYTES:,}); nothing was changed")
        status = "unchanged" if result.status == "unchanged" else "replaced" if existing else "added"
        log.info("audit.kb_added", actor=actor, doc=doc_id, status=status, kind=kind, chunks=len(chunks),
                 bytes=size, version=result.version)
        return AddResult(status, record)

    @staticmethod
    def _existing(stored: dict[str, DocRecord], source: str, title: str) -> DocRecord | None:
        """Return the stored document this one replaces: the same path, else the same title
        (a web page only by its URL: a site's pages often share a title)."""
        docs = stored.values()
        same_path = [d for d in docs if d.source and d.source == source]
        if same_path:
            return same_path[0]
        if "://" in source:
            return None
        same_title = [d for d in docs if d.title.casefold() == title.casefold() and "://" not in d.source]
        return same_title[0] if same_title else None

    def reembed(self, actor: str = "cli", force: bool = False) -> dict[str, int]:
        """Embed again, with the current models (ranking and gate), every document whose
        vectors came from other models or are missing (all of them with force), and the gate's
        baseline passages. Returns how many documents were re-embedded, and how many were
        already current."""
        if self.embedder is None:
            raise KnowledgeError("EMBEDDING_MODEL=off: there is no model to embed with")
        model, done, current = self.embedder.model, 0, 0
        self._ensure_anchors(force=force)
        for doc in self.documents():
            if (doc.embedding_model, doc.gate_model) == self.models and not force:
                current += 1
                continue
            stored = self.store.document_chunks(doc)
            try:
                texts, gate_model = self._embed(doc.id, [c.text for c in stored], strict=True)
            except KnowledgeError as err:
                raise KnowledgeError(f"{err}; {done} re-embedded so far") from err
            assert texts is not None
            if self.gate is not None and not gate_model:
                raise KnowledgeError(f"{doc.id}: the gate model's embeddings failed; {done} re-embedded so far")
            record = replace(doc, embedding_model=model, gate_model=gate_model, updated_at=time.time())
            chunks = [chunk_json(c.text, c.tokens) for c in stored]
            record = replace(record, bytes=stored_size(record, chunks, texts))  # the vectors as they are now
            result = self.store.put(record, chunks, texts,
                                    max_chunks=self.settings.KNOWLEDGE_MAX_CHUNKS,
                                    max_bytes=self.settings.KNOWLEDGE_MAX_BYTES)
            if result.status not in ("stored", "unchanged"):
                raise KnowledgeError(f"{doc.id}: {result.status.replace('_', ' ')} with its vectors; "
                                     f"{done} re-embedded so far")
            done += 1
            log.info("audit.kb_reembedded", actor=actor, doc=doc.id, model=model, chunks=len(stored),
                     version=result.version)
        return {"reembedded": done, "current": current}

    def _ensure_anchors(self, force: bool = False) -> None:
        """Embed the dense gate's baseline passages (bot/llm/anchors.py) once per model."""
        if self.embedder is None:
            return
        wanted = "+".join(m for m in self.models if m)
        if self.store.anchors_model() == wanted and not force:
            return
        try:
            every = {self.embedder.model: anchor_vectors(self.embedder, EMBED_DEADLINE_S)}
            if self.gate is not None:
                every[self.gate.model] = anchor_vectors(self.gate, EMBED_DEADLINE_S)
        except LLMUnavailable:
            return  # logged by the embedder; the next document (or `kb reembed`) tries again
        self.store.put_anchors([vectors_text({m: vs[i] for m, vs in every.items()}) for i in range(len(ANCHORS))])

    def _embed(self, name: str, texts: list[str], strict: bool = False) -> tuple[list[str] | None, str]:
        """Return the chunks' vectors as stored (the ranking model's, and the gate model's
        beside them when it answered) and the gate model's name ("" without its vectors);
        (None, "") without embeddings. strict: a failure of the ranking model raises."""
        if self.embedder is None:
            return None, ""
        try:
            ranked = self.embedder.embed(texts, deadline_s=EMBED_DEADLINE_S, purpose="knowledge_index")
        except LLMUnavailable as err:
            if strict:
                raise KnowledgeError(f"{name}: the embeddings failed ({err})") from err
            # Words still find it; `kb reembed` adds the vectors once the model answers.
            log.warning("knowledge.stored_without_vectors", document=name, model=self.embedder.model,
                        error=str(err)[:200], detail="found by words alone until `kb reembed`")
            return None, ""
        gated: list[bytes] | None = None
        if self.gate is not None:
            try:
                gated = self.gate.embed(texts, deadline_s=EMBED_DEADLINE_S, purpose="knowledge_index")
            except LLMUnavailable as err:  # ranked by the other model meanwhile; `kb reembed` adds them
                log.warning("knowledge.stored_without_gate_vectors", document=name, model=self.gate.model,
                            error=str(err)[:200], detail="gated hit by hit until `kb reembed`")
        every = [{self.embedder.model: vector} for vector in ranked]
        if gated is None or self.gate is None:
            return [vectors_text(v) for v in every], ""
        for vectors, vector in zip(every, gated):
            vectors[self.gate.model] = vector
        return [vectors_text(v) for v in every], self.gate.model
