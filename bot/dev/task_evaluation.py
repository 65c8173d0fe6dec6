"""`whatsapp-bot eval tasks`: measure task extraction (docs/tasks.md) on labelled dialogues
(eval_data/tasks.json) against any OpenAI-compatible endpoint (in CI, the stand-in).

Each dialogue goes through the production request (bot/conversation/task.py: the prompt,
Structured Outputs, the lenient parse) and its flags are compared with the labels:
- flag accuracy: both flags right / dialogues, and each flag apart;
- dropped context: history or memory the labelled answer needed but the model said was not
  needed (the dangerous error, reported apart: the reply would miss what it needs);
- failed: no usable answer (the bot would bypass: full context).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bot.conversation.task import ask_for_task, parse_task, render_task_request
from bot.dev.evaluation import percent, share
from bot.exceptions import LLMUnavailable
from bot.llm.client import LLMClient
from bot.llm.prompts import Prompt
from bot.storage.records import Pair

DEFAULT_TASK_DATA = Path(__file__).parent / "eval_data" / "tasks.json"


def load_dialogues(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read the labelled dialogues."""
    return list(json.loads(Path(path or DEFAULT_TASK_DATA).read_text(encoding="utf-8"))["dialogues"])


def evaluate_tasks(dialogues: list[dict[str, Any]], llm: LLMClient, prompt: Prompt, model: str) -> dict[str, Any]:
    """Run every dialogue through the task call and score the flags."""
    rows = []
    started = time.monotonic()
    for d in dialogues:
        recent = [Pair(user=p["user"], assistant=p["assistant"], ts=0.0, sid="eval") for p in d["recent"]]
        names = [f"{e['name']} ({e['type']})" for e in d.get("entities", [])]
        request = render_task_request(d["message"], d["summary"], recent, list(d.get("fact_keys", [])), names)
        try:
            task = parse_task(ask_for_task(llm, prompt, request, model=model, deadline_s=30).text)
        except LLMUnavailable:
            task = None
        want = d["expected"]
        row: dict[str, Any] = {"id": d["id"], "kind": d["kind"], "message": d["message"], "expected": want,
                               "reference_task": d["reference_task"], "failed": task is None}
        if task is not None:
            got = {"depends_on_chat_history": task.depends_on_chat_history,
                   "depends_on_user_memory": task.depends_on_user_memory}
            row.update(got=got, task=task.task)
            row["history_dropped"] = want["depends_on_chat_history"] and not task.depends_on_chat_history
            row["memory_dropped"] = want["depends_on_user_memory"] and not task.depends_on_user_memory
        rows.append(row)
    scored = [r for r in rows if not r["failed"]]

    return {
        "dialogues": len(rows),
        "failed": len(rows) - len(scored),
        "flag_accuracy": share(sum(r["got"] == r["expected"] for r in scored), len(scored)),
        "history_accuracy": share(sum(r["got"]["depends_on_chat_history"] == r["expected"]["depends_on_chat_history"]
                                      for r in scored), len(scored)),
        "memory_accuracy": share(sum(r["got"]["depends_on_user_memory"] == r["expected"]["depends_on_user_memory"]
                                     for r in scored), len(scored)),
        "history_dropped": sum(r["history_dropped"] for r in scored),
        "memory_dropped": sum(r["memory_dropped"] for r in scored),
        "seconds": round(time.monotonic() - started, 1),
        "rows": rows,
    }


def print_task_report(report: dict[str, Any]) -> None:
    """Print the figures, then the dialogues where a needed context would be dropped."""

    print(f"task eval: {report['dialogues']} dialogues, {report['seconds']} s, answered by "
          + ("the STAND-IN (its heuristics, not a model)" if report.get("answered_by") == "stand-in"
             else f"model {report.get('model')}") + f" at {report.get('endpoint')}")
    print(f"  both flags right     {percent(report['flag_accuracy'])}")
    print(f"  history flag right   {percent(report['history_accuracy'])}")
    print(f"  memory flag right    {percent(report['memory_accuracy'])}")
    print(f"  DROPPED needed history {report['history_dropped']}, memory {report['memory_dropped']} "
          "(the dangerous error: the reply would miss context it needs)")
    print(f"  no usable answer     {report['failed']} (the bot bypasses: full context)")
    for r in report["rows"]:
        if r.get("history_dropped") or r.get("memory_dropped"):
            print(f"  - {r['id']} [{r['kind']}] {r['message']!r}: expected {r['expected']}, got {r['got']}")
