"""`whatsapp-bot eval knowledge`: retrieval measured on labelled sets (eval_data/knowledge/).

A fictional business's documents go through the production path (extract, chunk, embed,
store in a private embedded Redis, build the index) and every question is searched as a
message would be. Two sets of questions, each labelled with the document and a few strings
the chunk that answers it must hold (negatives, which no document answers, with none):
- `words` (questions.json): questions that mostly share the documents' words;
- `meaning` (questions_hard.json, HARD.md): paraphrases that avoid them, questions in
  another language than the page that answers them, questions buried in a voice note, and
  more negatives; written before any tuning;
- `offtopic` (questions_offtopic.json): messages about anything but the business
  (greetings, thanks, small talk, jokes, general knowledge, a weekend's voice note), written
  before the gate model was tuned.
Negatives are of two kinds (`negative`): off_topic, which should get no reference at all, and
unanswered, a question about the business that no document answers, where the nearest
passage is useful (the reply model sees that it does not answer and offers a person): its
rate is reported, with no target.
Each set is split into a tuning half and a held-out half (HARD.md; `words` alternates by
position): thresholds are chosen on the tuning half, the targets are read on the held-out.

Reported for BM25 alone and, with an embedding model, for BM25 + embeddings (hybrid):
- recall@3: a chunk that answers is among the first 3 hits that pass the gate;
- MRR: the mean of 1 / the rank of the first such chunk among those hits (0 when none);
- hit rate (recall@3 injected): a chunk that answers is in the block actually injected
  (within the budget);
- false injections: the share of negatives that get any reference at all; split into the
  off-topic rate and the on-domain unanswered rate.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config.knowledge import KNOWLEDGE_TOP_K
from bot.dev.embedded import start_embedded_redis
from bot.dev.evaluation import named_slices
from bot.knowledge.index import unaccented
from bot.knowledge.library import Library
from bot.knowledge.reference import Considered
from bot.knowledge.retrieval import Retriever
from bot.llm.embeddings import Embedder
from bot.services import Services
from bot.storage.connection import make_redis
from bot.storage.knowledge import KnowledgeStore, StoredChunk

DATA_DIR = Path(__file__).resolve().parent / "eval_data" / "knowledge"
#: The question files, by set name.
SETS = {"words": "questions.json", "meaning": "questions_hard.json", "offtopic": "questions_offtopic.json",
        "site": "questions_site.json"}
#: The stand-in website (bot/dev/standin_site.py), added as `kb add <its root>` adds a site.
SITE_DIR = "site"
#: Documents only the `meaning` set asks about (added with the others).
EXTRA_MANIFEST = "manifest_hard_extra.json"
#: On the held-out halves, with embeddings (docs/semantic.md): the answering passage injected
#: for the words and the meaning set, and off-topic messages given a reference.
TARGET_WORDS, TARGET_MEANING, TARGET_OFF_TOPIC = 0.97, 0.70, 0.05
#: With BM25 alone, on the `words` set (what words can do: docs/knowledge.md).
TARGET_RECALL_BM25, TARGET_FALSE_BM25 = 0.90, 0.10


@dataclass(frozen=True)
class Question:
    """One labelled question: the chunks that answer it (none for a negative)."""

    id: str
    lang: str
    question: str
    answers: list[dict[str, Any]]
    set: str = "words"
    split: str = "tune"  # tune or heldout
    kind: str = ""  # meaning set: paraphrase, cross_language, buried, negative
    negative: str = ""  # a negative's kind: off_topic or unanswered


def load_set(directory: Path | None = None) -> tuple[list[dict[str, Any]], list[Question]]:
    """Return the documents (the manifest's, then the extra ones) and the questions of every
    set found in the folder."""
    directory = directory or DATA_DIR
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    if (directory / EXTRA_MANIFEST).is_file():
        manifest += json.loads((directory / EXTRA_MANIFEST).read_text(encoding="utf-8"))
    questions: list[Question] = []
    for name, file in SETS.items():
        if not (directory / file).is_file():
            continue
        raw = json.loads((directory / file).read_text(encoding="utf-8"))["questions"]
        for position, q in enumerate(raw):
            split = q.get("split") or ("tune" if position % 2 == 0 else "heldout")
            questions.append(Question(q["id"], q["lang"], q["question"], q.get("answers", []), name, split,
                                      q.get("kind", ""), q.get("negative", "") if not q.get("answers") else ""))
    return manifest, questions


def add_site(client: Any, library: Library, settings: Any) -> dict[str, str]:
    """Serve the stand-in website on 127.0.0.1, add it by its root through the production
    path (robots.txt, links, conditional GETs), and return its documents' labels
    ("site/news.html")."""
    from bot.dev.standin_site import SiteServer
    from bot.knowledge.sites import Sites
    from bot.storage.sites import SiteStore

    server = SiteServer()
    try:
        sites = Sites(SiteStore(client), library, settings.model_copy(update={"KB_ALLOW_PRIVATE_URLS": True}))
        report = sites.add(server.url)
    finally:
        server.stop()
    labels = {}
    for url, page in report.site.pages.items():
        rest = url.split("/site/", 1)[1] if "/site/" in url else ""
        labels[page.doc_id] = f"{SITE_DIR}/{rest or 'index.html'}"
    return labels


def _fold(text: str) -> str:
    return " ".join(unaccented(text.casefold()).split())


def answers(question: Question, chunk: StoredChunk, sources: dict[str, str]) -> bool:
    """True when the chunk is from a labelled document and holds all its strings."""
    body = _fold(chunk.text)
    return any(
        sources.get(chunk.doc_id) == label["doc"] and all(_fold(s) in body for s in label["contains"])
        for label in question.answers
    )


def passed(considered: Considered) -> bool:
    """True when a hit went through the gate (whether or not it then fitted the budget)."""
    return considered.reason not in ("below_min_score", "not_business", "translation")


def score(questions: list[Question], retriever: Retriever, sources: dict[str, str]) -> list[dict[str, Any]]:
    """Search every question and return each one's outcome."""
    index = retriever.index()
    rows: list[dict[str, Any]] = []
    for q in questions:
        reference = retriever.search(q.question, index, deadline_s=5.0, language=q.lang)
        ranked = [c.hit for c in reference.considered if passed(c)]
        rank = next((i for i, hit in enumerate(ranked, start=1) if answers(q, hit.chunk, sources)), None)
        injected = [p.hit.chunk for p in reference.picked]
        rows.append({
            "id": q.id, "set": q.set, "split": q.split, "kind": q.kind or ("negative" if not q.answers else ""),
            "lang": q.lang, "question": q.question, "negative": not q.answers, "rank": rank,
            "negative_kind": q.negative, "gate": reference.gate.to_public() if reference.gate else None,
            "injected": [c.id for c in injected], "hit": any(answers(q, c, sources) for c in injected),
            "best": [f"{h.chunk.id}:{h.score:.2f}" + ("" if h.margin is None else f"/{h.margin:+.3f}")
                     for h in ranked[:3]],
            "embedded": reference.embedded,
            # every hit considered, for tuning the gate: lexical score, margin, answers?
            "hits": [[round(h.score, 4), None if h.margin is None else round(h.margin, 4), h.vector_rank,
                      answers(q, h.chunk, sources)] for h in (c.hit for c in reference.considered)],
        })
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return recall@3, MRR, hit rate and false injections of some rows."""
    positives = [r for r in rows if not r["negative"]]
    negatives = [r for r in rows if r["negative"]]

    def share(items: list[dict[str, Any]], test: Any) -> float:
        return sum(1 for r in items if test(r)) / len(items) if items else 0.0

    off_topic = [r for r in negatives if r.get("negative_kind") == "off_topic"]
    unanswered = [r for r in negatives if r.get("negative_kind") == "unanswered"]
    return {
        "questions": len(rows), "answerable": len(positives), "negatives": len(negatives),
        "off_topic": len(off_topic), "unanswered": len(unanswered),
        "off_topic_rate": share(off_topic, lambda r: bool(r["injected"])),
        "unanswered_rate": share(unanswered, lambda r: bool(r["injected"])),
        "recall_at_3": share(positives, lambda r: r["rank"] is not None and r["rank"] <= KNOWLEDGE_TOP_K),
        "mrr": sum(1 / r["rank"] for r in positives if r["rank"]) / len(positives) if positives else 0.0,
        "hit_rate": share(positives, lambda r: r["hit"]),
        "false_injections": share(negatives, lambda r: bool(r["injected"])),
    }


def report_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the measures of every slice: each set's halves, both sets' halves, languages, kinds."""
    slices: dict[str, Any] = {}
    for split in ("tune", "heldout"):
        slices[split] = summarize([r for r in rows if r["split"] == split])
        for name in SETS:
            part = [r for r in rows if r["split"] == split and r["set"] == name]
            if part:
                slices[f"{name}/{split}"] = summarize(part)
    for name in SETS:
        part = [r for r in rows if r["set"] == name]
        if part:
            slices[name] = summarize(part)
    by_language = {lang: summarize([r for r in rows if r["lang"] == lang]) for lang in sorted({r["lang"] for r in rows})}
    kinds = sorted({r["kind"] for r in rows if r["set"] == "meaning" and r["kind"] and not r["negative"]})
    by_kind = {kind: summarize([r for r in rows if r["set"] == "meaning" and r["kind"] == kind]) for kind in kinds}
    for kind in kinds:
        for split in ("tune", "heldout"):
            part = [r for r in rows if r["set"] == "meaning" and r["kind"] == kind and r["split"] == split]
            if part:
                by_kind[f"{kind}/{split}"] = summarize(part)
    for kind in ("off_topic", "unanswered"):
        for split in ("tune", "heldout"):
            part = [r for r in rows if r["negative_kind"] == kind and r["split"] == split]
            if part:
                by_kind[f"{kind}/{split}"] = summarize(part)
    return {
        **summarize(rows), "slices": slices, "by_language": by_language, "by_kind": by_kind,
        "misses": [r for r in rows if not r["negative"] and not (r["rank"] and r["rank"] <= KNOWLEDGE_TOP_K)],
        "false": [r for r in rows if r["negative"] and r["injected"]],
        "rows": rows,
    }


def run_knowledge_eval(services: Services, directory: Path | None = None) -> dict[str, Any]:
    """Load the documents into a private Redis and measure BM25 alone, then with the
    embedding model (unless EMBEDDING_MODEL=off)."""
    manifest, questions = load_set(directory)
    directory = directory or DATA_DIR
    settings = services.settings
    report: dict[str, Any] = {"min_score": settings.KNOWLEDGE_MIN_SCORE, "min_margin": settings.KNOWLEDGE_MIN_MARGIN,
                              "documents": len(manifest), "embedding_model": settings.EMBEDDING_MODEL}
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as tmp:
        embedded = start_embedded_redis(Path(tmp) / "eval.db")
        try:
            modes: list[tuple[str, Embedder | None]] = [("bm25", None)]
            if services.embedder is not None:
                modes.append(("hybrid", services.embedder))
            for mode, embedder in modes:
                client = make_redis(embedded.url)
                client.flushdb()
                store = KnowledgeStore(client)
                library = Library(store, services.counter, settings, embedder,
                                  services.gate_embedder if embedder is not None else None)
                sources = {}
                for doc in manifest:
                    path = directory / doc["file"]
                    result = library.add(path.read_bytes(), source=doc["file"], title=doc.get("title"),
                                         language=doc.get("language"), actor="eval")
                    sources[result.doc.id] = doc["file"]
                if (directory / SITE_DIR).is_dir():
                    sources.update(add_site(client, library, settings))
                retriever = Retriever(store, services.counter, settings, embedder,
                                      services.gate_embedder if embedder is not None else None)
                report[mode] = report_rows(score(questions, retriever, sources))
                index = retriever.index()
                report[mode]["chunks"] = len(index)
                if embedder is not None and (not index.has_vectors or (retriever.gate is not None and not index.has_gate)):
                    report[mode]["warning"] = ("the embedding models did not answer when the documents were added "
                                               f"({len(index.vector_positions)} of {len(index)} chunks with vectors, "
                                               f"{len(index.gate_positions)} with the gate model's): is the `embed` "
                                               "process running?")
        finally:
            embedded.stop()
    words = report["bm25"]["slices"].get("words", report["bm25"])
    met = words["recall_at_3"] >= TARGET_RECALL_BM25 and words["false_injections"] <= TARGET_FALSE_BM25
    if "hybrid" in report:
        held = report["hybrid"]["slices"]
        met = met and held["words/heldout"]["hit_rate"] >= TARGET_WORDS \
            and held["meaning/heldout"]["hit_rate"] >= TARGET_MEANING \
            and held["heldout"]["off_topic_rate"] <= TARGET_OFF_TOPIC
    report["targets_met"] = met
    return report


def _line(name: str, m: dict[str, Any]) -> str:
    return (f"  {name:<19} recall@3 {m['recall_at_3']:6.1%}  MRR {m['mrr']:.3f}  injected {m['hit_rate']:6.1%}  "
            f"off-topic {m['off_topic_rate']:6.1%} of {m['off_topic']:<3} unanswered {m['unanswered_rate']:6.1%} "
            f"of {m['unanswered']:<3} ({m['answerable']} answerable)")


def print_knowledge_report(report: dict[str, Any]) -> None:
    """Print the measures per mode and slice, then the misses and false injections of each."""
    print(f"knowledge eval: {report['documents']} documents, KNOWLEDGE_MIN_SCORE {report['min_score']}, "
          f"KNOWLEDGE_MIN_MARGIN {report['min_margin']}, embeddings {report['embedding_model']}")
    for mode in ("bm25", "hybrid"):
        r = report.get(mode)
        if r is None:
            print("\nhybrid: not run (EMBEDDING_MODEL=off)")
            continue
        print(f"\n{mode}: {r['questions']} questions, {r['chunks']} chunks")
        if r.get("warning"):
            print(f"  WARNING: {r['warning']}")
        for name, m in named_slices(r):
            print(_line(name, m))
        for row in r["misses"]:
            print(f"  miss   {row['id']} ({row['split']}): {row['question']!r} -> {', '.join(row['best']) or 'nothing'}")
        for row in r["false"]:
            print(f"  false  {row['id']} ({row['split']}): {row['question']!r} -> {', '.join(row['injected'])}")
    print(f"\ntargets (held-out, hybrid: injected words >= {TARGET_WORDS:.0%}, meaning >= {TARGET_MEANING:.0%}, "
          f"off-topic <= {TARGET_OFF_TOPIC:.0%}; words with BM25 alone: recall@3 >= {TARGET_RECALL_BM25:.0%}, "
          f"false injections <= {TARGET_FALSE_BM25:.0%}) {'met' if report['targets_met'] else 'NOT met'}")
