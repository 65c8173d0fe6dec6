"""The business's tools (docs/tools.md): each with its method, whether it is a write that asks
first, its health from the recent calls, and the recent calls of the most recent users."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from bot.ops.console.auth import login_required
from bot.ops.console.helpers import services
from bot.users.tools import recent_calls, tool_rows

bp = Blueprint("tools", __name__, url_prefix="/tools")


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    """Show the tools and their recent calls."""
    tools = services().tools
    book = tools.book if tools is not None else None
    users = services().users
    calls = recent_calls(users.actions, users.index) if book is not None else []
    return render_template("console/tools.html", book=book, rows=tool_rows(book, calls) if book else [],
                           calls=calls[:50])
