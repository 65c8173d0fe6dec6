"""`whatsapp-bot eval memory`: which facts reach the memory block, on a labelled set
(eval_data/memory.json, MEMORY.md).

Twelve users with 30-50 facts each write messages in Portuguese, Spanish or English that
touch a fact by meaning, without its words; each message is labelled with the facts a good
answer needs ("must"). Every user's facts go through the production path: embedded as they
are written (bot/memory/vectors.py, the center on a private embedded Redis), each message
embedded as on the message path, then `select_memory` with the shipped budget.

Reported for the fallback (no vectors: the English cue words) and, with an embedding model,
by meaning, on the tuning half and the held-out half (the labels' `split`):
- facts in the block: the share of labelled facts that reach the block;
- messages served: the share of messages whose labelled facts all reach it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bot.dev.embedded import start_embedded_redis
from bot.dev.evaluation import named_slices
from bot.memory.selection import select_memory
from bot.memory.vectors import MODEL_FIELD, FactVectors
from bot.services import Services
from bot.storage.centers import CenterStore
from bot.storage.connection import make_redis
from bot.storage.records import Fact

DATA = Path(__file__).resolve().parent / "eval_data" / "memory.json"
#: On the held-out half, by meaning (docs/semantic.md).
TARGET_FACTS = 0.90


def load_users(path: Path | None = None) -> list[dict[str, Any]]:
    """Return the labelled users."""
    return list(json.loads((path or DATA).read_text(encoding="utf-8"))["users"])


def user_facts(user: dict[str, Any]) -> dict[str, Fact]:
    """Return a user's facts as stored."""
    return {f["key"]: Fact(f["key"], f["value"], f["category"], float(f["confidence"]), float(f["importance"]))
            for f in user["facts"]}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the share of labelled facts in the block, and of messages fully served."""
    labelled = [r for r in rows if r["must"]]
    wanted = sum(len(r["must"]) for r in labelled)
    found = sum(len(set(r["must"]) & set(r["block"])) for r in labelled)
    return {
        "messages": len(rows), "labelled_facts": wanted,
        "facts_in_block": found / wanted if wanted else 0.0,
        "messages_served": sum(1 for r in labelled if set(r["must"]) <= set(r["block"])) / len(labelled)
        if labelled else 0.0,
        "facts_per_block": sum(len(r["block"]) for r in rows) / len(rows) if rows else 0.0,
    }


def report_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the measures overall and by half, language and kind, with the misses."""
    return {
        **summarize(rows),
        "slices": {name: summarize([r for r in rows if r["split"] == name]) for name in ("tune", "heldout")},
        "by_language": {lang: summarize([r for r in rows if r["lang"] == lang]) for lang in sorted({r["lang"] for r in rows})},
        "by_kind": {kind: summarize([r for r in rows if r["kind"] == kind]) for kind in sorted({r["kind"] for r in rows})},
        "misses": [r for r in rows if not set(r["must"]) <= set(r["block"])],
        "rows": rows,
    }


def run_memory_eval(services: Services, path: Path | None = None) -> dict[str, Any]:
    """Select every labelled message's block without vectors, then by meaning."""
    settings = services.settings
    users = load_users(path)
    report: dict[str, Any] = {"users": len(users), "embedding_model": settings.EMBEDDING_MODEL,
                              "max_tokens": settings.MEMORY_MAX_TOKENS}
    with tempfile.TemporaryDirectory(prefix="memory-eval-") as tmp:
        embedded = start_embedded_redis(Path(tmp) / "eval.db")
        try:
            vectors = None
            if services.embedder is not None:
                vectors = FactVectors(services.embedder, CenterStore(make_redis(embedded.url)))
            for mode in ("cues", "meaning"):
                if mode == "meaning" and vectors is None:
                    continue
                rows = []
                for user in users:
                    facts = user_facts(user)
                    stored = {MODEL_FIELD: vectors.model, **vectors.encode(facts.values())} if vectors else {}
                    for message in user["messages"]:
                        similarity = None
                        if mode == "meaning" and vectors is not None:
                            query = services.embedder.query(  # type: ignore[union-attr]
                                message["text"], deadline_s=10, purpose="eval")
                            similarity = vectors.similarities(query, stored,
                                                              {k: f.category for k, f in facts.items()})
                        selection = select_memory(
                            {"user": facts}, message["text"], services.counter,
                            threshold=settings.EXTRACTION_CONFIDENCE, conflict_margin=settings.CONFLICT_MARGIN,
                            max_tokens=settings.MEMORY_MAX_TOKENS, similarity=similarity)
                        block = [item.fact.key for item in selection.selected]
                        ranked = sorted(similarity or {}, key=lambda k: -(similarity or {})[k])
                        rows.append({
                            "id": message["id"], "user": user["id"], "lang": message["lang"], "kind": message["kind"],
                            "split": message["split"], "text": message["text"], "must": message["must"],
                            "block": block,
                            "must_rank": {k: ranked.index(k) + 1 for k in message["must"] if k in ranked},
                            "must_similarity": {k: round((similarity or {}).get(k, 0.0), 3) for k in message["must"]},
                        })
                report[mode] = report_rows(rows)
        finally:
            embedded.stop()
    held = report.get("meaning", report["cues"])["slices"]["heldout"]
    report["targets_met"] = "meaning" in report and held["facts_in_block"] >= TARGET_FACTS
    return report


def print_memory_report(report: dict[str, Any]) -> None:
    """Print the measures per mode and slice, then the misses by meaning."""
    print(f"memory eval: {report['users']} users, MEMORY_MAX_TOKENS {report['max_tokens']}, "
          f"embeddings {report['embedding_model']}")
    for mode in ("cues", "meaning"):
        r = report.get(mode)
        if r is None:
            print("\nmeaning: not run (EMBEDDING_MODEL=off)")
            continue
        print(f"\n{mode}:")
        for name, m in [("all", r), *named_slices(r)]:
            print(f"  {name:<14} facts in block {m['facts_in_block']:6.1%}  messages served {m['messages_served']:6.1%}"
                  f"  ({m['labelled_facts']} labelled facts, {m['facts_per_block']:.1f} facts per block)")
        if mode == "meaning":
            for row in r["misses"]:
                missing = [k for k in row["must"] if k not in row["block"]]
                print(f"  miss {row['id']} ({row['split']}): {row['text']!r} lacks "
                      + ", ".join(f"{k} (rank {row['must_rank'].get(k, '-')}, {row['must_similarity'][k]})"
                                  for k in missing))
    print(f"\ntarget (held-out, by meaning: facts in block >= {TARGET_FACTS:.0%}) "
          f"{'met' if report['targets_met'] else 'NOT met'}")
