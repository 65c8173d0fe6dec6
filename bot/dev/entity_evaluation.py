"""`whatsapp-bot eval entities`: measure entity consolidation, matching and retrieval
(docs/entities.md) on a labelled set of users (eval_data/entities.json).

Deterministic part, no model (entities given), run in CI against the note's targets:
- duplicate_rate: the raw mentions of each user (variants a model returns over several
  runs) folded in by the production consolidation: entities stored beyond the labelled
  distinct ones / entities stored (target < 5 %); over-merges are counted apart;
- match_recall / match_precision: the labelled entities each message names against what
  the production matcher finds, by level (target recall >= 90 %);
- near_miss_false_matches: entities found in messages written to look like a known name
  without being it (target 0);
- retrieval_coverage / irrelevant_share: the facts picked for the matched entities (and one
  RELATED hop) against the labelled relevant facts (targets >= 80 % and < 20 %).

Model part, against any OpenAI-compatible endpoint:
- pass 2 (the real prompt, Structured Outputs, the lenient parser) on each user's facts; the
  entities it names against the labels;
- the task call's check (TASK_EXTRACTION=on): each message's matches after the task model
  dropped the one-word names it did not name and added those it did; recall and near misses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.conversation.task import ask_for_task, parse_task, render_task_request, with_task_entities
from bot.dev.evaluation import percent, share
from bot.exceptions import LLMUnavailable
from bot.llm.client import LLMClient
from bot.llm.prompts import Prompt
from bot.memory.entities import Mention, absorb, relate
from bot.memory.entity_extraction import extract_entities, render_entity_request
from bot.memory.matching import EntityIndex
from bot.memory.names import entity_key
from bot.memory.selection import entity_picks
from bot.storage.entities import Entity
from bot.storage.records import Fact

#: The task call's deadline in the eval: a slow endpoint is measured, not bypassed.
EVAL_TASK_DEADLINE_S = 30.0
DEFAULT_ENTITY_DATA = Path(__file__).parent / "eval_data" / "entities.json"
#: The targets (docs/entities.md), as the report checks them.
TARGETS = {"match_recall": 0.90, "retrieval_coverage": 0.80, "irrelevant_share": 0.20, "duplicate_rate": 0.05,
           "near_miss_false_matches": 0}


def load_users(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read the labelled users."""
    return list(json.loads(Path(path or DEFAULT_ENTITY_DATA).read_text(encoding="utf-8"))["users"])


def labelled_entities(user: dict[str, Any]) -> dict[str, Entity]:
    """Return the user's labelled entities as stored entities, RELATED edges computed."""
    out = {}
    for e in user["entities"]:
        key = entity_key(e["type"], e["name"])
        out[key] = Entity(key, e["name"], e["type"], list(e.get("aliases", [])), 0.9, list(e["facts"]))
    relate(out)
    return out


def consolidate(user: dict[str, Any], similarity: float) -> dict[str, int]:
    """Fold the user's raw mentions in one by one, as successive pass-2 runs would."""
    entities: dict[str, Entity] = {}
    for raw in user["raw_mentions"]:
        entities, _ = absorb(entities, [Mention(raw["name"], raw["type"], (raw["fact"],), (), 0.9)], [],
                             similarity=similarity, min_confidence=0.0, max_entities=10_000)
    distinct = len({raw["expect"] for raw in user["raw_mentions"]})
    return {"stored": len(entities), "distinct": distinct, "duplicates": max(0, len(entities) - distinct),
            "over_merged": max(0, distinct - len(entities))}


def score_messages(user: dict[str, Any], threshold: float, related_weight: float) -> list[dict[str, Any]]:
    """Match each labelled message and pick facts as the memory step does."""
    entities = labelled_entities(user)
    index = EntityIndex(entities.values())
    results = []
    for message in user["messages"]:
        matches = index.match(message["text"], threshold)
        found = {m.key for m in matches}
        expected = set(message["entities"])
        picked = {fact for fact, _why, _tier in entity_picks(matches, entities, related_weight)}
        relevant = set(message["relevant_facts"])
        results.append({
            "user": user["id"], "kind": message["kind"], "text": message["text"],
            "expected": sorted(expected), "found": sorted(found),
            "levels": {m.key: m.strategy for m in matches if m.key in expected},
            "picked": sorted(picked), "relevant": sorted(relevant),
        })
    return results


def evaluate_deterministic(
    users: list[dict[str, Any]], *, threshold: float, similarity: float, related_weight: float
) -> dict[str, Any]:
    """Return the deterministic figures, with every miss and false match listed."""
    merged = [consolidate(u, similarity) for u in users]
    messages = [r for u in users for r in score_messages(u, threshold, related_weight)]
    expected = sum(len(r["expected"]) for r in messages)
    hit = sum(len(set(r["expected"]) & set(r["found"])) for r in messages)
    found = sum(len(r["found"]) for r in messages)
    by_level: dict[str, int] = {}
    for r in messages:
        for level in r["levels"].values():
            by_level[level] = by_level.get(level, 0) + 1
    relevant = sum(len(r["relevant"]) for r in messages)
    covered = sum(len(set(r["relevant"]) & set(r["picked"])) for r in messages)
    picked = sum(len(r["picked"]) for r in messages)
    stored = sum(m["stored"] for m in merged)
    kinds: dict[str, dict[str, int]] = {}
    for r in messages:
        k = kinds.setdefault(r["kind"], {"messages": 0, "expected": 0, "matched": 0, "false": 0})
        k["messages"] += 1
        k["expected"] += len(r["expected"])
        k["matched"] += len(set(r["expected"]) & set(r["found"]))
        k["false"] += len(set(r["found"]) - set(r["expected"]))
    return {
        "users": len(users),
        "messages": len(messages),
        "match_recall": share(hit, expected),
        "match_precision": share(hit, found),
        "matched_by_level": by_level,
        "near_miss_false_matches": sum(len(set(r["found"]) - set(r["expected"])) for r in messages
                                       if r["kind"] == "near_miss"),
        "false_matches": found - hit,
        "retrieval_coverage": share(covered, relevant),
        "irrelevant_share": share(picked - sum(len(set(r["picked"]) & set(r["relevant"])) for r in messages),
                                   picked),
        "duplicate_rate": share(sum(m["duplicates"] for m in merged), stored),
        "over_merged": sum(m["over_merged"] for m in merged),
        "by_kind": kinds,
        "misses": [r for r in messages if set(r["expected"]) != set(r["found"])],
    }


def evaluate_model(users: list[dict[str, Any]], llm: LLMClient, prompt: Prompt, model: str) -> dict[str, Any]:
    """Run pass 2 on each user's facts and compare the entities named with the labels."""
    labelled = named = right = 0
    misses = []
    for user in users:
        facts = [Fact(f["key"], f["value"], f.get("category", "other"), 0.9) for f in user["facts"]]
        items, _completion = extract_entities(llm, prompt, render_entity_request([], facts), model=model)
        got = {entity_key(i.type, i.name) for i in items}
        want = {entity_key(e["type"], e["name"]) for e in user["entities"]}
        labelled, named, right = labelled + len(want), named + len(got), right + len(got & want)
        if got != want:
            misses.append({"user": user["id"], "missing": sorted(want - got), "extra": sorted(got - want)})
    return {"entity_recall": share(right, labelled), "entity_precision": share(right, named),
            "labelled": labelled, "named": named, "misses": misses}


def evaluate_task_check(
    users: list[dict[str, Any]], llm: LLMClient, prompt: Prompt, model: str, *, threshold: float
) -> dict[str, Any]:
    """Match each labelled message, then let the task call check and add (as the task step
    does with TASK_EXTRACTION=on and ENTITY_TASK_CHECK=true, one call per message); return
    recall and near-miss false matches after it."""
    expected = hit = near_miss = failed = 0
    dropped_right = dropped_wrong = 0
    for user in users:
        entities = labelled_entities(user)
        index = EntityIndex(entities.values())
        names = [f"{e.name} ({e.type})" for e in entities.values()]
        keys = [f["key"] for f in user["facts"]]
        for message in user["messages"]:
            matches = index.match(message["text"], threshold)
            try:
                completion = ask_for_task(llm, prompt, render_task_request(message["text"], "", [], keys, names),
                                          model=model, deadline_s=EVAL_TASK_DEADLINE_S)
                task = parse_task(completion.text)
            except LLMUnavailable:
                task = None
            if task is None:  # the bypass: the matches as they are
                failed += 1
            else:
                matches, dropped = with_task_entities(task, matches, entities, check=True)
                right = sum(m.key not in message["entities"] for m in dropped)
                dropped_right, dropped_wrong = dropped_right + right, dropped_wrong + len(dropped) - right
            found, want = {m.key for m in matches}, set(message["entities"])
            expected, hit = expected + len(want), hit + len(found & want)
            near_miss += len(found - want) if message["kind"] == "near_miss" else 0
    return {"match_recall": share(hit, expected), "near_miss_false_matches": near_miss,
            "dropped_right": dropped_right, "dropped_wrong": dropped_wrong, "task_failed": failed}


def meets_targets(report: dict[str, Any]) -> dict[str, bool]:
    """Return, for each of the note's targets, whether the deterministic figures meet it."""
    return {
        "match_recall": (report["match_recall"] or 0) >= TARGETS["match_recall"],
        "retrieval_coverage": (report["retrieval_coverage"] or 0) >= TARGETS["retrieval_coverage"],
        "irrelevant_share": (report["irrelevant_share"] or 0) < TARGETS["irrelevant_share"],
        "duplicate_rate": (report["duplicate_rate"] or 0) < TARGETS["duplicate_rate"],
        "near_miss_false_matches": report["near_miss_false_matches"] == TARGETS["near_miss_false_matches"],
    }


def print_entity_report(report: dict[str, Any]) -> None:
    """Print the figures, then what went wrong."""

    print(f"entity eval: {report['users']} users, {report['messages']} messages (no model: entities given)")
    print(f"  match recall            {percent(report['match_recall'])}  (target >= 90%)  by level {report['matched_by_level']}")
    print(f"  match precision         {percent(report['match_precision'])}  ({report['false_matches']} false matches)")
    print(f"  near-miss false matches {report['near_miss_false_matches']}  (target 0)")
    print(f"  retrieval coverage      {percent(report['retrieval_coverage'])}  (target >= 80%)")
    print(f"  irrelevant share        {percent(report['irrelevant_share'])}  (target < 20%)")
    print(f"  duplicate rate          {percent(report['duplicate_rate'])}  (target < 5%; {report['over_merged']} over-merged)")
    for kind, k in sorted(report["by_kind"].items()):
        print(f"    {kind:15} {k['messages']:3} messages, matched {k['matched']}/{k['expected']}, false {k['false']}")
    for r in report["misses"]:
        print(f"  - {r['user']} [{r['kind']}] {r['text']!r}: expected {r['expected']}, found {r['found']}")
    model = report.get("model_part")
    if model:
        print(f"  pass 2 ({model['answered_by']} {model['model']}): entity recall {percent(model['entity_recall'])}, "
              f"precision {percent(model['entity_precision'])} ({model['named']} named, {model['labelled']} labelled)")
    check = report.get("task_check")
    if check:
        print(f"  with the task call's check ({check['answered_by']} {check['model']}): match recall "
              f"{percent(check['match_recall'])}, near-miss false matches {check['near_miss_false_matches']}, "
              f"dropped {check['dropped_right']} right / {check['dropped_wrong']} wrong, "
              f"{check['task_failed']} task calls failed")
