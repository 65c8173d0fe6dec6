"""The confirm step: a typed yes to the write the bot proposed runs it, exactly as it was
shown, once; anything else drops the proposal, and the message is answered as usual
(docs/tools.md)."""

from __future__ import annotations

import time
from typing import Any

import structlog

from bot.conversation.catalog import Catalog
from bot.conversation.tool_use import confirm_call
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.storage.actions import ActionStore
from bot.storage.records import STORED_TEXT_CHARS, Pair, clip
from bot.tools.actions import is_affirmation
from bot.tools.caller import ToolCaller, ToolResult
from bot.tools.openapi import ToolBook

log = structlog.get_logger(__name__)

#: What the user is told of an API's refusal, at most (its own words: "that slot is taken").
WHY_CHARS = 160


def _why(result: ToolResult | dict[str, Any]) -> str:
    """Return the API's own short reason for a refusal, if it gave one, as a sentence."""
    data = result.data if isinstance(result, ToolResult) else result.get("why")
    if isinstance(data, str):
        text = data
    elif isinstance(data, dict):
        text = next((data[k] for k in ("message", "detail", "error", "title") if isinstance(data.get(k), str)), "")
    else:
        text = ""
    text = " ".join(text.split())[:WHY_CHARS]
    return f"{text.rstrip('.')}. " if text else ""


class ConfirmStep:
    """Run the proposed write on the user's typed yes; drop it on anything else."""

    name = "confirm"
    records = False
    reads = ("stored.claim", "heard.text", "heard.language", "heard.transcript", "heard.image", "heard.reply_prefix")
    writes = ("heard.reply_prefix", "record.pair", "answer.reply", "answer.status", "answer.tool_calls")

    def __init__(self, actions: ActionStore, book: ToolBook, caller: ToolCaller, catalog: Catalog,
                 redis_worst_s: float) -> None:
        self.actions = actions
        self.book = book
        self.caller = caller
        self.catalog = catalog
        self.redis_worst_s = redis_worst_s

    def __call__(self, turn: Turn) -> None:
        if turn.stored.claim is None:
            return
        user, language = turn.msg.user, turn.heard.language
        # Only the user's own typed words confirm: never a transcript, a photo's caption or a location.
        typed = not turn.msg.has_attachment and turn.heard.transcript is None and turn.heard.image is None
        try:
            taken = self.actions.take(user, turn.msg.sid, turn.received) if typed and is_affirmation(turn.heard.text) \
                else None
            if taken is None:
                dropped = self.actions.drop(user, turn.received)
                if dropped is not None:
                    log.info("tools.dropped", tool=dropped.get("tool"))
                    turn.heard.reply_prefix = self.catalog.text("tool_dropped", language,
                                                                action=dropped.get("summary", "")) + turn.heard.reply_prefix
                return
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="confirm", error=str(err))
            return
        action, done = taken
        if done is None:
            done = self._run(turn, action)
        key = "tool_done" if done.get("outcome") == "ok" else "tool_failed"
        reply = self.catalog.text(key, language, action=action.get("summary", ""), why=_why(done))
        text = turn.heard.text or ""
        turn.record.pair = Pair(user=clip(text, STORED_TEXT_CHARS), assistant=clip(reply, STORED_TEXT_CHARS),
                                ts=time.time(), sid=turn.msg.sid)
        turn.settle(reply, status="answered")

    def _run(self, turn: Turn, action: dict[str, Any]) -> dict[str, Any]:
        """Send the confirmed write and record its outcome; return the outcome."""
        spec = self.book.tools.get(str(action.get("tool")))
        if spec is None:  # the document changed since the proposal
            result = ToolResult(str(action.get("tool"))[:64], "refused", detail="the tool is gone")
        else:
            room = max(0.5, turn.remaining() - 3 * self.redis_worst_s)
            result = confirm_call(self.caller, spec, action, turn.msg.user, timeout_s=room)
        done: dict[str, Any] = {"outcome": result.outcome, "status": result.status, "at": round(time.time())}
        if not result.ok:
            done["why"] = _why(result).strip()
        entry = {"tool": result.tool, "outcome": result.outcome, "status": result.status,
                 "ms": round(result.duration_s * 1000), "at": done["at"], "write": True, "action": action.get("id"),
                 "arguments": action.get("arguments") or {}}
        turn.answer.tool_calls = [entry]  # the turn's one call: a confirmed turn asks no model
        try:
            self.actions.finish(turn.msg.user, turn.msg.sid, done)
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="confirm_finish", error=str(err))
        log.info("tools.confirmed", tool=result.tool, outcome=result.outcome, status=result.status)
        return done
