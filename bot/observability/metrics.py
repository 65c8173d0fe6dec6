"""Prometheus metrics. Under gunicorn with several workers (and the RQ worker), set
PROMETHEUS_MULTIPROC_DIR to a shared empty directory so /metrics adds up every process."""

from __future__ import annotations

import os
from collections import deque
from typing import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

MESSAGES = Counter(
    "bot_messages_total",
    "Inbound messages by outcome (accepted into context or rejected) and reason.",
    ["outcome", "reason"],
)
REPLY_SECONDS = Histogram(
    "bot_reply_seconds",
    "Webhook time from request to TwiML, model wait included.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 4, 6, 10, 15),
)
STEP_SECONDS = Histogram(
    "bot_step_seconds",
    "Time each step of the message path took (docs/architecture.md), the model step's wait included.",
    ["step"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
MODEL_TOKENS = Counter(
    "bot_model_tokens_total",
    "Model tokens by purpose (reply, task, summary, extraction, entities), model and kind (prompt, completion).",
    ["purpose", "model", "kind"],
)
SUMMARY_LAG_SECONDS = Histogram(
    "bot_summary_lag_seconds",
    "Time from the pair that triggered a summary to the summary being stored.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900),
)
BACKGROUND_LAG_SECONDS = Histogram(
    "bot_background_lag_seconds",
    "Time from a background job being due (in its queue) to its end, by job: queueing plus work.",
    ["job"],
    buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10, 30, 60, 300),
)
SUMMARIES = Counter("bot_summaries_total", "Summary job runs by result (stored, skipped, failed).", ["result"])
EXTRACTIONS = Counter(
    "bot_extractions_total", "Fact extraction runs by result (stored, nothing_new, skipped, failed, waiting: the user was still writing).", ["result"]
)
TASKS = Counter(
    "bot_tasks_total", "Task extraction before the reply, by result (extracted, bypassed, failed, invalid).", ["result"]
)
ENTITY_RUNS = Counter(
    "bot_entity_runs_total", "Pass-2 (entity extraction) runs by result (stored, nothing_new, skipped, failed, discarded).", ["result"]
)
REST_SENDS = Counter(
    "bot_rest_messages_total", "Replies sent through Twilio's Messages API (REPLY_MODE=rest), by result.", ["result"]
)
DELIVERY_FAILURES = Counter(
    "bot_delivery_failures_total",
    "Status callbacks reporting a reply failed or undelivered, by status and Twilio error code.",
    ["status", "error_code"],
)
DEFERRED = Counter(
    "bot_deferred_total",
    "Deferred messages (answered by a worker through the Messages API) by kind (voice, photo, behind: a "
    "message queued behind another) and outcome (queued, known, answered, failed, not_sent, erased).",
    ["kind", "outcome"],
)
DEFERRED_SECONDS = Histogram(
    "bot_deferred_seconds",
    "Time from the webhook's acknowledgement of a deferred message to its reply sent.",
    buckets=(0.5, 1, 2, 3, 5, 8, 12, 20, 30, 60, 120, 300),
)
TYPING_INDICATORS = Counter(
    "bot_typing_indicators_total", "Typing indicators sent for deferred messages, by outcome (sent, failed).",
    ["outcome"],
)
MEDIA = Counter(
    "bot_media_total",
    "Attachments by kind (voice, photo, location, other) and outcome (answered, refused, fetch_failed, "
    "too_large, too_long, unreadable, transcription_failed, disabled).",
    ["kind", "outcome"],
)
TRANSCRIPTION_SECONDS = Histogram(
    "bot_transcription_seconds",
    "Time one voice-note transcription took (the model call alone).",
    buckets=(0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 10),
)
KNOWLEDGE_RETRIEVALS = Counter(
    "bot_knowledge_retrievals_total",
    "Knowledge-base searches on the message path by outcome (hit: reference injected; miss: no chunk "
    "reached KNOWLEDGE_MIN_SCORE; empty: no documents; unavailable: the index could not be loaded).",
    ["outcome"],
)
MESSAGE_EMBEDDINGS = Counter(
    "bot_message_embeddings_total",
    "Message embeddings by outcome (ok; skipped: no words; failed, timeout or paused after failures: words "
    "alone served).",
    ["outcome"],
)
KNOWLEDGE_INDEX_VERSION = Gauge(
    "bot_knowledge_index_version",
    "The knowledge-base version this process's index was built from (one sample per live process that "
    "built one: the web workers).",
    ["index"],  # a labelled gauge has no sample until set, so RQ workers report none
    multiprocess_mode="liveall",
)
KNOWLEDGE_INDEX_BUILD_SECONDS = Histogram(
    "bot_knowledge_index_build_seconds",
    "Time to load the knowledge base from Redis and build a process's index after a change.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
)
JOBS_REDONE = Counter(
    "bot_jobs_redone_total",
    "Background jobs put back at the front of their queue at once because their worker died mid-job, by queue.",
    ["queue"],
)
PENDING_DROPPED = Counter(
    "bot_pending_pairs_dropped_total",
    "Unsummarized pairs dropped at PENDING_MAX_BYTES, the last resort against a runaway client (none in a "
    "normal burst: extraction and the summary are hurried first).",
)
OUTBOUND_FAILED = Counter(
    "bot_outbound_failed_total",
    "Messages sent by API that did not arrive, by Twilio's error code (63016: outside the window; 63024, 63003: "
    "the recipient; 21610: the user opted out), from the status callback or the API's answer.",
    ["code"],
)
REMINDERS_SENT = Counter(
    "bot_reminders_total",
    "Reminders that came due, by what came of them: sent, undeliverable (outside the window, no template), "
    "not_sent (the user sent STOP), failed (Twilio refused it).",
    ["outcome"],
)
HELD_MESSAGES = Counter(
    "bot_held_messages_total",
    "Messages held for a user outside WhatsApp's 24-hour window, by kind (reply, person), sent when they write again.",
    ["kind"],
)
TOOL_CALLS = Counter(
    "bot_tool_calls_total",
    "Calls of the business's tools by tool and outcome (ok, http_error, timeout, unreachable, refused, "
    "too_large, not_json, bad_arguments, unknown_tool, proposed: a write waiting for the user's yes).",
    ["tool", "outcome"],
)
TOOL_SECONDS = Histogram(
    "bot_tool_seconds",
    "Time one call of a business tool took, by tool.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
GC_SECONDS = Histogram(
    "bot_gc_pause_seconds",
    "Time each garbage collection stopped the process (every thread waits on it), by generation.",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
RESETS = Counter("bot_resets_total", "Conversation resets by who asked (user, operator, admin_api, cli).", ["via"])


#: Pauses measured and not yet put in GC_SECONDS: (generation, seconds).
_GC_PAUSES: deque[tuple[int, float]] = deque(maxlen=10_000)
#: How often the pauses measured are put in GC_SECONDS.
GC_FLUSH_S = 2.0


def time_gc() -> None:
    """Measure every garbage collection's pause, and put them in GC_SECONDS every
    GC_FLUSH_S from a thread of this process (once per process: the web's, after its fork).

    The callback itself takes no lock: a collection can start inside any code, prometheus's
    own lock included, and observing there would wait on it forever (docs/scaling.md, Pauses)."""
    import gc
    import threading
    import time

    if any(getattr(cb, "__name__", "") == "_gc_timer" for cb in gc.callbacks):
        return
    started: list[float] = [0.0]

    def _gc_timer(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:  # deque.append: atomic, no lock
            _GC_PAUSES.append((int(info.get("generation", -1)), time.perf_counter() - started[0]))

    def _flush() -> None:
        while True:
            time.sleep(GC_FLUSH_S)
            flush_gc()

    gc.callbacks.append(_gc_timer)
    threading.Thread(target=_flush, name="gc-metrics", daemon=True).start()


def flush_gc() -> int:
    """Put the pauses measured since the last flush in GC_SECONDS; return how many."""
    count = 0
    while _GC_PAUSES:
        generation, seconds = _GC_PAUSES.popleft()
        GC_SECONDS.labels(str(generation)).observe(seconds)
        count += 1
    return count


class QueueDepthCollector(Collector):
    """Report RQ queue depths at scrape time."""

    def __init__(self, depth: Callable[[], dict[str, int]]) -> None:
        self.depth = depth

    def collect(self) -> Iterable[Metric]:
        """Yield one gauge with a sample per queue (and its failed registry)."""
        gauge = GaugeMetricFamily("bot_queue_depth", "Jobs waiting (or failed) per RQ queue.", labels=["queue"])
        try:
            for name, count in self.depth().items():
                gauge.add_metric([name], count)
        except Exception:  # Redis down: report no samples rather than fail the scrape
            pass
        yield gauge


def render(depth: Callable[[], dict[str, int]] | None) -> tuple[bytes, str]:
    """Return the exposition body and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    if depth is not None:
        queues = CollectorRegistry()
        queues.register(QueueDepthCollector(depth))
        body += generate_latest(queues)
    return body, CONTENT_TYPE_LATEST
