"""The knowledge base through the admin API (/admin/knowledge…), behind the same bearer token.

    GET    /admin/knowledge                    the documents, the version and the totals
    POST   /admin/knowledge/documents          add or replace: a multipart `file` (with
                                               optional `title`, `language`), or JSON
                                               {"filename", "content" | "content_base64", "title"?, "language"?}
    GET    /admin/knowledge/documents/<id>     one document and its chunks
    DELETE /admin/knowledge/documents/<id>     remove it
    POST   /admin/knowledge/search             {"question"}: what a message would get, and why
"""

from __future__ import annotations

import base64
import binascii

from flask import Blueprint, abort, jsonify, request
from flask.typing import ResponseReturnValue

from bot.knowledge.library import KnowledgeError
from bot.ops.api import guard, json_body, services

bp = Blueprint("admin_knowledge", __name__, url_prefix="/admin")
guard(bp)

#: Room for a document's bytes and the form around them (the app's default is Twilio-sized).
FORM_OVERHEAD = 64 * 1024


@bp.errorhandler(KnowledgeError)
def knowledge_error(err: KnowledgeError) -> ResponseReturnValue:
    """A document the knowledge base refuses: 400 with the reason; nothing was changed."""
    return jsonify(error=str(err)), 400


@bp.errorhandler(413)
def too_large(_err: Exception) -> ResponseReturnValue:
    """A body past the cap, as JSON."""
    return jsonify(error="the request is too large (KNOWLEDGE_MAX_DOC_BYTES)"), 413


@bp.get("/knowledge")
def knowledge() -> ResponseReturnValue:
    """Return every document, with the version and the totals."""
    s = services()
    return jsonify(**s.knowledge.totals(), documents=[d.to_public() for d in s.library.documents()])


@bp.post("/knowledge/documents")
def add_document() -> ResponseReturnValue:
    """Add a document, or replace the one with its file name or title (no-op when unchanged)."""
    s = services()
    request.max_content_length = s.settings.KNOWLEDGE_MAX_DOC_BYTES * 4 // 3 + FORM_OVERHEAD  # base64 in JSON
    upload = request.files.get("file")
    if upload is not None:
        data, filename = upload.read(), upload.filename or ""
        title, language = request.form.get("title") or None, request.form.get("language") or None
    else:
        body = json_body()
        filename, title, language = str(body.get("filename", "")), body.get("title"), body.get("language")
        if isinstance(body.get("content"), str):
            data = body["content"].encode("utf-8")
        elif isinstance(body.get("content_base64"), str):
            try:
                data = base64.b64decode(body["content_base64"], validate=True)
            except (binascii.Error, ValueError):
                abort(400, description="content_base64 is not base64")
        else:
            abort(400, description="send a multipart `file`, or JSON with `content` or `content_base64`")
    if not filename or "/" in filename or "\\" in filename:
        abort(400, description="filename must be a file name such as faq.md (no folders)")
    for name, value in (("title", title), ("language", language)):
        if value is not None and not isinstance(value, str):
            abort(400, description=f"{name} must be a string")
    result = s.library.add(data, source=filename, title=title, language=language, actor="admin_api")
    return jsonify(result.to_public()), 201 if result.status == "added" else 200


@bp.get("/knowledge/documents/<doc_id>")
def show_document(doc_id: str) -> ResponseReturnValue:
    """Return one document and its chunks."""
    try:
        doc, chunks = services().library.document(doc_id)
    except KnowledgeError as err:
        return jsonify(error=str(err)), 404
    return jsonify(**doc.to_public(), chunk_texts=[{"id": c.id, "tokens": c.tokens, "text": c.text} for c in chunks])


@bp.delete("/knowledge/documents/<doc_id>")
def remove_document(doc_id: str) -> ResponseReturnValue:
    """Remove one document."""
    removed = services().library.remove(doc_id, actor="admin_api")
    return jsonify(removed=removed), 200 if removed else 404


@bp.post("/knowledge/search")
def search() -> ResponseReturnValue:
    """Return what a message would get from the knowledge base: the chunks injected, and why."""
    question = json_body().get("question")
    if not isinstance(question, str) or not question.strip():
        abort(400, description="question must be a non-empty string")
    return jsonify(services().retriever.preview(question[:2000]).to_public())
