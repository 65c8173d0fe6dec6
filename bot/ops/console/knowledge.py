"""The knowledge base's page: the documents with their totals, one document and its chunks,
adding (an upload) and removing documents, and trying a search.

Views are thin: they call the Library (bot/knowledge/library.py) the CLI and the admin API
use, with actor `console:<operator>` (it logs `audit.kb_added` and `audit.kb_removed`), and
the Retriever's preview for a search, which changes nothing and so is a GET (`?q=` on the
page itself: a document may well be called "search"). Document text is shown autoescaped
and never logged.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import RequestEntityTooLarge

from bot.config.knowledge import KNOWLEDGE_TOP_K, LANGUAGES
from bot.knowledge.library import KnowledgeError
from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services, settings
from bot.ops.console.stats import size

log = structlog.get_logger(__name__)
bp = Blueprint("knowledge", __name__, url_prefix="/knowledge")
# A document's id is `ident` in the paths, as a job's is on the queues page (the access tests
# fill every console path's variables from one list of sample values).

#: Room for the form around an uploaded document (the app's limit is Twilio-sized, 64 KB).
FORM_OVERHEAD = 64 * 1024
#: A question to try is cut here (the admin API's search does the same).
MAX_QUESTION = 2000
#: What a document id may look like in a path (the Library makes slugs: a-z, 0-9 and dashes).
_DOC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: File types the Library reads, for the file picker (it checks them again).
ACCEPT = ".md,.markdown,.txt,.html,.htm,.pdf"


@bp.before_request
def allow_uploads() -> None:
    """Let a signed-in operator's upload be as large as KNOWLEDGE_MAX_DOC_BYTES and its form.
    This runs before login_required reads the form for the CSRF token, so the limit is in
    place before any of the body is parsed; every other console request keeps the app's."""
    if request.endpoint == "console.knowledge.add" and g.get("operator") is not None:
        request.max_content_length = settings().KNOWLEDGE_MAX_DOC_BYTES + FORM_OVERHEAD


@bp.errorhandler(RequestEntityTooLarge)
def too_large(_err: RequestEntityTooLarge) -> ResponseReturnValue:
    """A body past the limit: say so and go back; nothing was read or changed."""
    if request.endpoint == "console.knowledge.add":
        cap = settings().KNOWLEDGE_MAX_DOC_BYTES
        flash(f"Nothing added: the file is over KNOWLEDGE_MAX_DOC_BYTES ({size(cap)}, {cap:,} bytes). "
              "Split it into smaller documents.", "error")
    else:
        flash("Nothing changed: the request was too large.", "error")
    return redirect(url_for("console.knowledge.index"))


def _to_index(anchor: str = "") -> ResponseReturnValue:
    return redirect(url_for("console.knowledge.index") + (f"#{anchor}" if anchor else ""))


def doc_or_404(doc_id: str) -> str:
    """Return the document id named in the path, or 404 when it cannot be one."""
    if not _DOC_ID.match(doc_id):
        abort(404)
    return doc_id


def file_name(raw: str | None) -> str:
    """Return an upload's file name without any folder a browser sent, control characters or
    surrounding spaces (it becomes the document's source: the same name replaces it)."""
    name = re.split(r"[\\/]", raw or "")[-1]
    return _CONTROL.sub("", name).strip()[:200]


def sentence(message: str) -> str:
    """Return a message ending with a full stop (a KnowledgeError's reason may not have one)."""
    message = message.strip()
    return message if message.endswith((".", "!", "?")) else message + "."


#: What a search's outcome codes mean, in an operator's words (the codes stay in the technical detail).
OUTCOMES = {"picked": "given", "cut_to_fit": "given, shortened", "below_min_score": "too weak a match",
            "over_budget": "no room left in the prompt", "past_top_k": "enough passages already",
            "not_business": "not about the business", "translation": "a translation of one given"}


def chunks_label(n: int) -> str:
    return f"{n} passage{'s' if n != 1 else ''}"


def language_label(language: str | None) -> str:
    """Return how a document's language reads: its code, or what the default is."""
    if language:
        return language
    default = settings().KNOWLEDGE_LANGUAGE
    return f"{default} (default)" if default else "any (words matched as written)"


def explain(reason: str) -> str:
    """Return why a considered passage was or was not given to the model, with the setting
    that decided it."""
    s = settings()
    below = f"a match below {s.KNOWLEDGE_MIN_SCORE:g} (KNOWLEDGE_MIN_SCORE)"
    if s.embeddings_on:
        below = ("not close enough by words or by meaning (its match, and how much closer it is than "
                 f"unrelated passages, below KNOWLEDGE_MIN_MARGIN {s.KNOWLEDGE_MIN_MARGIN:g})")
    return {
        "picked": "",
        "cut_to_fit": "cut at a sentence to fit",
        "below_min_score": below,
        "not_business": "the message is not about the business (the gate model, EMBEDDING_GATE_MODEL): no passage goes in",
        "translation": "it says what a passage given already says, in another language",
        "over_budget": f"the prompt's room for documents (KNOWLEDGE_MAX_TOKENS {s.KNOWLEDGE_MAX_TOKENS}) is full",
        "past_top_k": f"only the best {KNOWLEDGE_TOP_K} passages go in",
    }.get(reason, reason)


def _with_place(row: dict[str, Any]) -> dict[str, Any]:
    """Add the chunk's document id and number (from "<doc>#<n>"), to link to it."""
    doc, _, n = str(row["chunk"]).rpartition("#")
    return {**row, "doc": doc, "n": n}


def search_result(question: str, documents: int) -> dict[str, Any]:
    """Return what a message asking `question` would get now, and why, for the page."""
    result = services().retriever.preview(question).to_public()
    considered = [{**_with_place(c), "why": explain(c["reason"])} for c in result["considered"]]
    if result["injected"]:
        empty = ""
    elif not documents:
        empty = "Nothing would be given to the model: the knowledge base holds no documents."
    elif result.get("gate") and result["gate"]["decision"] == "not_business":
        empty = f"Nothing would be given to the model: {result['gate']['reason']}."
    elif all(c["reason"] == "below_min_score" for c in considered) and result["embedded"]:
        empty = (f"Nothing would be given to the model: no passage is close enough by words or by meaning "
                 f"(KNOWLEDGE_MIN_MARGIN {settings().KNOWLEDGE_MIN_MARGIN:g}).")
    elif all(c["reason"] == "below_min_score" for c in considered):
        empty = (f"Nothing would be given to the model: no passage is a strong enough match (KNOWLEDGE_MIN_SCORE "
                 f"{settings().KNOWLEDGE_MIN_SCORE:g}).")
    else:
        empty = "Nothing would be given to the model: see why for each passage below."
    return {**result, "injected": [_with_place(p) for p in result["injected"]], "considered": considered,
            "empty": empty}


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    """Show the totals and the documents, the upload form, and a search when one is asked."""
    s = services()
    totals = s.knowledge.totals()
    documents = s.library.documents()
    question = request.args.get("q", "").strip()[:MAX_QUESTION]
    found = search_result(question, len(documents)) if question else None
    return render_template(
        "console/knowledge.html", totals=totals, documents=documents, question=question, found=found,
        outcomes=OUTCOMES, min_score=settings().KNOWLEDGE_MIN_SCORE,
        languages=sorted(LANGUAGES.items()), default_language=settings().KNOWLEDGE_LANGUAGE,
        max_doc_bytes=settings().KNOWLEDGE_MAX_DOC_BYTES, accept=ACCEPT, size=size,
        language_label=language_label, chunks_label=chunks_label,
        sites=[site.to_public() for site in s.sites.sites()] if s.sites is not None else [],
        sync_every=every(settings().KB_SYNC_INTERVAL),
    )


def every(seconds: int) -> str:
    """Return how often the sites are synced, as a person says it."""
    if seconds <= 0:
        return "never on their own (KB_SYNC_INTERVAL=0: use Sync now)"
    if seconds % 86_400 == 0:
        days = seconds // 86_400
        return "day" if days == 1 else f"{days} days"
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return "hour" if hours == 1 else f"{hours} hours"
    return f"{seconds:,} seconds"


@bp.get("/<ident>")
@login_required
def document(ident: str) -> ResponseReturnValue:
    """Show one document's record and every chunk it became."""
    try:
        doc, chunks = services().library.document(doc_or_404(ident))
    except KnowledgeError:
        abort(404)
    return render_template("console/knowledge_doc.html", doc=doc, chunks=chunks, size=size,
                           language_label=language_label, chunks_label=chunks_label)


@bp.post("/documents")
@login_required
def add() -> ResponseReturnValue:
    """Add an uploaded document, or replace the one with its file name or title."""
    upload = request.files.get("file")
    name = file_name(upload.filename if upload is not None else "")
    if upload is None or not name:
        flash("Nothing added: choose a file to add.", "error")
        return _to_index("add")
    data = upload.read()
    title = request.form.get("title", "").strip() or None
    language = request.form.get("language", "").strip() or None
    try:
        result = services().library.add(data, source=name, title=title, language=language, actor=actor())
    except KnowledgeError as err:
        flash(f"Nothing added: {sentence(str(err))}", "error")
        return _to_index("add")
    doc = result.doc
    if result.status == "unchanged":
        flash(f"Unchanged {doc.id} ({chunks_label(doc.chunks)}): it already holds this file.", "ok")
    else:
        flash(f"{result.status.capitalize()} {doc.id} ({chunks_label(doc.chunks)}).", "ok")
    return _to_index("documents")


@bp.post("/sites/sync")
@login_required
def sync() -> ResponseReturnValue:
    """Queue a sync of every website now (the workers run it)."""
    from bot.jobs.sites import sync_now

    s = services()
    if s.sites is None or not s.sites.sites():
        flash("Nothing to sync: the knowledge base has no websites.", "error")
        return _to_index("sites")
    job = sync_now(s.jobs.connection)
    log.info("audit.kb_sync_requested", actor=actor(), job=job)
    flash("Sync queued: the workers read every site again now; this page shows it when it is done.", "ok")
    return _to_index("sites")


@bp.post("/<ident>/remove")
@login_required
def remove(ident: str) -> ResponseReturnValue:
    """Remove a document and its chunks, once its id is typed to confirm."""
    doc_id = doc_or_404(ident)
    typed = request.form.get("confirm", "").strip()
    if typed != doc_id:
        flash(f"Nothing removed: type the document's id ({doc_id}) exactly to confirm.", "error")
        if request.form.get("back") == "document":
            return redirect(url_for("console.knowledge.document", ident=doc_id) + "#remove")
        return _to_index("documents")
    existed = services().library.remove(doc_id, actor=actor())
    flash(f"Removed {doc_id}." if existed else f"There was no document {doc_id}.", "ok" if existed else "error")
    return _to_index("documents")
