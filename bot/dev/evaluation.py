"""`whatsapp-bot eval`: measure fact extraction on a labelled set of conversations.

Each conversation is replayed turn by turn through the production path (the extraction
prompt, Structured Outputs, the lenient parser, the storage rules) on a private embedded
Redis, then the stored facts are compared with the labels:

- precision: stored facts that match a labelled fact / stored facts;
- recall: labelled facts found / labelled facts (docs/memory.md: the target is 85 %);
- false-positive rate: conversations with nothing to remember (jokes, negations,
  hypotheticals, other people, questions) where anything was stored, plus any stored
  fact that mentions a forbidden word (docs/memory.md: under 10 % incorrect);
- update correctness: updates (moving city…) whose final value is the new one.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from rapidfuzz import fuzz

from bot.dev.embedded import start_embedded_redis
from bot.dev.standin import STANDIN_OWNER
from bot.llm.client import LLMClient
from bot.memory.extraction import extract_facts
from bot.memory.rules import FactRules, normalize_key, normalize_value
from bot.services import Services
from bot.storage.connection import make_redis
from bot.storage.facts import FactStore
from bot.storage.records import Fact, Pair

DEFAULT_DATA = Path(__file__).parent / "eval_data" / "facts.json"
#: A value matches when it contains the label or is this similar to it (0-100).
VALUE_SIMILARITY = 85
#: A key matches a label's when equal after normalization or this similar.
KEY_SIMILARITY = 75


@dataclass
class Case:
    """One labelled conversation."""

    id: str
    kind: str
    turns: list[tuple[str, str]]
    expected: dict[str, str]
    forbidden: list[str]
    update: dict[str, str] | None


def load_cases(path: str | Path | None = None) -> list[Case]:
    """Read the labelled conversations."""
    raw = json.loads(Path(path or DEFAULT_DATA).read_text(encoding="utf-8"))
    return [
        Case(
            id=item["id"],
            kind=item.get("kind", ""),
            turns=[(t["user"], t.get("assistant", "")) for t in item["turns"]],
            expected=dict(item.get("expected", {})),
            forbidden=list(item.get("forbidden", [])),
            update=item.get("update"),
        )
        for item in raw
    ]


def value_matches(stored: str, label: str) -> bool:
    """Return whether a stored value says what the label says."""
    a, b = normalize_value(stored), normalize_value(label)
    return b in a or fuzz.token_set_ratio(a, b) >= VALUE_SIMILARITY


def key_matches(stored: str, label: str) -> bool:
    """Return whether a stored key names the labelled attribute."""
    label = normalize_key(label)
    return stored == label or fuzz.ratio(stored, label) >= KEY_SIMILARITY


def score_case(case: Case, facts: list[Fact]) -> dict[str, Any]:
    """Compare the stored facts of one conversation with its labels."""
    # A label is found when some stored fact says its value: models name keys freely
    # ("favourite_music", "music_taste"), and a wrong key with the right value still helps.
    found = {key: any(value_matches(f.value, value) for f in facts) for key, value in case.expected.items()}
    correct = [f for f in facts if any(value_matches(f.value, v) for v in case.expected.values())]
    forbidden_hits = [
        f.key for f in facts if any(w.lower() in f"{f.key} {f.value}".lower() for w in case.forbidden)
    ]
    result: dict[str, Any] = {
        "id": case.id,
        "kind": case.kind,
        "stored": {f.key: f.value for f in facts},
        "expected_found": found,
        "correct_stored": len(correct),
        "forbidden_hits": forbidden_hits,
    }
    if case.update:
        target = [f for f in facts if key_matches(f.key, case.update["key"])]
        result["update_correct"] = bool(target) and value_matches(target[0].value, case.update["to"]) and not (
            value_matches(target[0].value, case.update["from"])
        )
    return result


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Return precision, recall, false-positive rate and update correctness."""
    stored = sum(len(r["stored"]) for r in results)
    correct = sum(r["correct_stored"] for r in results)
    labelled = sum(len(r["expected_found"]) for r in results)
    found = sum(sum(r["expected_found"].values()) for r in results)
    negatives = [r for r in results if not r["expected_found"]]
    false_positive_cases = [r for r in negatives if r["stored"]] + [
        r for r in results if r["expected_found"] and r["forbidden_hits"]
    ]
    updates = [r for r in results if "update_correct" in r]
    return {
        "conversations": len(results),
        "facts_stored": stored,
        "precision": correct / stored if stored else None,
        "recall": found / labelled if labelled else None,
        "false_positive_rate": len(false_positive_cases) / len(results) if results else None,
        "update_correctness": sum(r["update_correct"] for r in updates) / len(updates) if updates else None,
        "updates": len(updates),
        "negatives": len(negatives),
    }


def eval_llm(services: Services, base_url: str | None, model: str | None, api_key: str | None) -> LLMClient:
    """Return the model client an eval uses: the configured one, or one for another endpoint."""
    settings = services.settings
    if not (base_url or api_key):
        return services.llm
    client = openai.OpenAI(
        api_key=api_key or settings.openai_api_key,
        base_url=base_url or settings.OPENAI_BASE_URL,
        timeout=30,
        max_retries=0,
    )
    return LLMClient(client, model or settings.extraction_model, timeout_s=30, max_retries=2, deadline_s=120)


def run_evaluation(
    services: Services,
    cases: list[Case],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Replay every case through extraction on a private Redis and score it."""
    settings = services.settings
    llm = eval_llm(services, base_url, model, api_key)
    model = model or settings.extraction_model
    rules = FactRules.from_settings(settings)
    results = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bot-eval-") as tmp:
        embedded = start_embedded_redis(Path(tmp) / "eval.db")
        try:
            facts = FactStore(make_redis(embedded.url))
            for index, case in enumerate(cases[:limit] if limit else cases):
                user = f"+1999{index:07d}"
                for n, (said, answered) in enumerate(case.turns, start=1):
                    pair = Pair(user=said, assistant=answered, ts=time.time(), sid=f"eval-{case.id}-{n}", n=n)
                    extract_facts(
                        user, [pair], facts, llm, services.prompts.extraction,
                        model=model, rules=rules, now=time.time() + n,
                    )
                stored = list(facts.load(user, "user").values()) + list(facts.load(user, "session").values())
                results.append(score_case(case, stored))
        finally:
            embedded.stop()
    report = aggregate(results)
    report["model"] = model
    report["endpoint"] = str(llm.client.base_url)
    report["answered_by"] = answered_by(llm.client)
    report["seconds"] = round(time.monotonic() - started, 1)
    report["cases"] = results
    return report


def answered_by(client: openai.OpenAI) -> str:
    """Return "stand-in" when the endpoint is our stand-in model (it says so on /models),
    else "model"."""
    try:
        owners = {getattr(m, "owned_by", "") for m in client.models.list()}
    except openai.OpenAIError:
        return "model"
    return "stand-in" if STANDIN_OWNER in owners else "model"


def percent(value: float | None) -> str:
    """Return a share as the eval reports print it ("94.9%", "n/a")."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def share(part: int, whole: int) -> float | None:
    """Return part / whole, None when there is nothing to divide by."""
    return part / whole if whole else None


def named_slices(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Return the measures of a split report (`eval knowledge`, `eval memory`) to print, each
    with its name: the halves ("slices"), then each language and each kind."""
    return [*report["slices"].items(), *[(f"lang {k}", m) for k, m in report["by_language"].items()],
            *[(f"kind {k}", m) for k, m in report["by_kind"].items()]]


def print_report(report: dict[str, Any]) -> None:
    """Print the figures and the cases that went wrong."""

    print(f"fact extraction eval: {report['conversations']} conversations, {report['seconds']} s")
    if report["answered_by"] == "stand-in":
        print(f"  answered by         the STAND-IN at {report['endpoint']}: these figures measure its "
              "regular expressions, not a model")
    else:
        print(f"  answered by         model {report['model']} at {report['endpoint']}")
    print(f"  precision            {percent(report['precision'])}  ({report['facts_stored']} facts stored)")
    print(f"  recall               {percent(report['recall'])}  (target >= 85%)")
    print(f"  false-positive rate  {percent(report['false_positive_rate'])}  (target < 10%)")
    print(f"  update correctness   {percent(report['update_correctness'])}  ({report['updates']} updates)")
    misses = [c for c in report["cases"] if not all(c["expected_found"].values()) or c["forbidden_hits"]
              or c.get("update_correct") is False or (not c["expected_found"] and c["stored"])]
    for case in misses:
        missing = [k for k, ok in case["expected_found"].items() if not ok]
        print(f"  - {case['id']}: stored {case['stored']}" + (f", missing {missing}" if missing else "")
              + (f", forbidden {case['forbidden_hits']}" if case["forbidden_hits"] else ""))
