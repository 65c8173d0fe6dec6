"""The overview: messages answered, active users, model spend today, queues, Redis memory,
and a messages-per-hour chart drawn as inline SVG by the template (no chart library)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from bot.ops.console.auth import login_required
from bot.ops.console.handover import reason
from bot.ops.console.helpers import services
from bot.ops.console.stats import hourly_chart, size
from bot.storage.server import redis_memory
from bot.users.directory import active_users

bp = Blueprint("overview", __name__)

#: The chart's span.
CHART_HOURS = 24


@bp.get("/")
@login_required
def index() -> ResponseReturnValue:
    """Show how the bot is doing now."""
    s = services()
    now = time.time()
    answered = s.activity.answered(CHART_HOURS, now)
    memory = redis_memory(s.redis, "user state")
    if s.settings.queue_redis_url != s.settings.REDIS_URL:
        memory += redis_memory(s.jobs.connection, "queues")
    return render_template(
        "console/overview.html",
        answered_hour=answered[-1][1] if answered else 0,
        answered_day=sum(count for _, count in answered),
        users=active_users(s.users, now),
        spend=spend_today(now),
        depth=s.jobs.depth(),
        memory=memory,
        size=size,
        chart=hourly_chart(answered),
        failed=sorted(s.activity.deliveries_failed(CHART_HOURS, now).items(), key=lambda kv: -kv[1]),
        reason=lambda code: reason("failed", code),
    )


def spend_today(now: float) -> dict[str, object]:
    """Return today's model usage (UTC) priced with MODEL_PRICES: the total, the calls, the
    tokens, and the models without a price."""
    s = services()
    prices = s.settings.model_prices
    rows = s.activity.usage_on(datetime.fromtimestamp(now, timezone.utc).date())
    costs = [(row, row.cost(prices)) for row in rows]
    return {
        "usd": sum(cost for _, cost in costs if cost is not None),
        "calls": sum(row.calls for row in rows),
        "tokens": sum(row.prompt_tokens + row.completion_tokens for row in rows),
        "unpriced": sorted({row.model for row, cost in costs if cost is None}),
    }
