"""The Knowledge page: documents listed with their totals, added by upload (added, replaced,
unchanged or refused with the Library's reason), removed after typing the id, a search that
shows what a message would get and why; audit-logged with actor console:<operator>, document
text escaped on every page and never logged."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot import create_app
from tests.ops.console.support import OPERATOR, PASSWORD, SECRET, TOKEN, add_operator, csrf_token, post, sign_in

pytestmark = pytest.mark.integration

PAGE = "/console/knowledge"
HOURS = b"""# Opening hours

Our shop in Porto opens every day.

## Weekdays

Monday to Friday we open at 08:00 and close at 19:30.

## Sundays

On Sunday we open at 09:00 and close at 18:00. The kitchen serves brunch until 15:00.
"""
FAQ = b"""# FAQ

## Do you deliver?

Yes: deliveries run from Tuesday to Sunday, between 10:00 and 18:00, anywhere in Porto.

## Can I bring my dog?

Dogs are welcome on the terrace, and we keep a water bowl by the door.
"""
HOSTILE = b"""# Tricks

<script>window.pwned=1</script> and <img src=x onerror="window.pwned=2"> are not markup here.
"""


def upload(client: Any, name: str, content: bytes, *, token: str | None = "page", **fields: str) -> Any:
    """POST the upload form with a file (and the page's CSRF token unless token=None)."""
    data: dict[str, Any] = {"title": "", "language": "", **fields, "file": (io.BytesIO(content), name)}
    if token == "page":
        data["csrf_token"] = csrf_token(client, PAGE)
    elif token is not None:
        data["csrf_token"] = token
    return client.post(f"{PAGE}/documents", data=data, content_type="multipart/form-data")


def flashed(client: Any, response: Any) -> str:
    """Follow a redirect back to the page and return it (its flash included)."""
    assert response.status_code == 302, response.get_data(as_text=True)
    assert response.headers["Location"].startswith(PAGE)
    return client.get(response.headers["Location"]).get_data(as_text=True)


def library(app: Any) -> Any:
    return app.extensions["bot.services"].library


def audits(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"].startswith("audit.")]


def test_the_page_lists_documents_with_their_totals(console_app, console) -> None:  # type: ignore[no-untyped-def]
    page = console.get(PAGE).get_data(as_text=True)
    assert "No documents yet" in page
    assert 'href="/console/knowledge"' in console.get("/console/").get_data(as_text=True)  # in the nav
    library(console_app).add(HOURS, source="docs/hours.md", language="en", actor="test")
    library(console_app).add(FAQ, source="faq.md", actor="test")
    page = console.get(PAGE).get_data(as_text=True)
    assert 'class="active">Knowledge</a>' in page
    rows = re.findall(r"<tr>\s*<td data-label=\"Title\"><a href=\"/console/knowledge/([\w-]+)\">([^<]+)</a>", page)
    assert rows == [("faq", "FAQ"), ("opening-hours", "Opening hours")]
    assert "docs/hours.md" in page and "markdown" in page and " UTC" in page
    assert "any (words matched as written)" in page  # the FAQ has no language and there is no default
    totals = console_app.extensions["bot.services"].knowledge.totals()
    assert re.search(rf'<h2>Passages</h2>\s*<p class="big">{totals["chunks"]}</p>', page)
    assert re.search(rf'<h2>Version</h2>\s*<p class="big">{totals["version"]}</p>', page)
    assert re.search(r'<h2>Documents</h2>\s*<p class="big">2</p>', page)
    assert page.count("Remove</summary>") == 2 and "Type faq to confirm" in page


def test_an_upload_is_added_then_unchanged_then_replaced_and_audited(console_app, console) -> None:  # type: ignore[no-untyped-def]
    with capture_logs() as logs:
        page = flashed(console, upload(console, "faq.md", FAQ))
    (doc,) = library(console_app).documents()
    assert doc.id == "faq" and doc.source == "faq.md" and doc.chunks >= 2
    assert f"Added faq ({doc.chunks} passages)." in page
    (audit,) = audits(logs)
    assert audit["event"] == "audit.kb_added" and audit["actor"] == "console:admin" and audit["status"] == "added"

    assert f"Unchanged faq ({doc.chunks} passages)" in flashed(console, upload(console, "faq.md", FAQ))
    changed = FAQ + b"\n## Is there wifi?\n\nYes, ask for the password at the counter.\n"
    page = flashed(console, upload(console, "faq.md", changed))
    (doc,) = library(console_app).documents()
    assert f"Replaced faq ({doc.chunks} passages)." in page
    # another file name with the same title (the document's own heading) replaces it too
    page = flashed(console, upload(console, "questions.md", changed.replace(b"wifi", b"Wi-Fi")))
    assert "Replaced faq" in page and [d.source for d in library(console_app).documents()] == ["questions.md"]


def test_the_title_and_language_fields_and_a_folder_in_the_file_name(console_app, console) -> None:  # type: ignore[no-untyped-def]
    page = flashed(console, upload(console, "shop/docs/horas.md", HOURS, title="Horário", language="pt"))
    (doc,) = library(console_app).documents()
    assert (doc.id, doc.title, doc.language, doc.source) == ("horario", "Horário", "pt", "horas.md")
    assert "Added horario (" in page
    assert '<option value="pt">pt · portuguese</option>' in page


@pytest.mark.parametrize(("name", "content", "fields", "reason"), [
    ("setup.exe", b"MZ\x90\x00", {},
     "Nothing added: setup.exe: only Markdown (.md), text (.txt), HTML (.html) and PDF (.pdf) are read."),
    ("empty.md", b"  \n", {}, "Nothing added: empty.md: the file is empty."),
    ("broken.pdf", b"%PDF-1.7 not really", {}, "Nothing added: broken.pdf:"),
    ("faq.md", FAQ, {"language": "xx"}, "Nothing added: language &#39;xx&#39;: use one of"),
    ("", b"", {}, "Nothing added: choose a file to add."),
])
def test_a_refused_upload_says_why_and_stores_nothing(  # type: ignore[no-untyped-def]
        console_app, console, redis_client, name, content, fields, reason) -> None:
    response = upload(console, name, content, **fields)
    page = flashed(console, response)
    assert 'class="flash flash-error"' in page and reason in page, page
    assert library(console_app).documents() == [] and not redis_client.keys("knowledge*")


def test_a_file_over_the_cap_is_refused_with_a_message_never_a_500(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, KNOWLEDGE_MAX_DOC_BYTES=1024))
    client = app.test_client()
    sign_in(client)
    # past the cap, but within the request's room: the Library refuses it
    page = flashed(client, upload(client, "long.md", b"# Long\n\n" + b"All day long. " * 100))
    assert "Nothing added: long.md: 1,408 bytes is over KNOWLEDGE_MAX_DOC_BYTES (1,024); split it." in page
    # far past it: the request itself is too large (413), and the page says so
    page = flashed(client, upload(client, "huge.md", b"# Huge\n\n" + b"x" * 200_000))
    assert "Nothing added: the file is over KNOWLEDGE_MAX_DOC_BYTES (1.0 KB, 1,024 bytes)." in page
    assert library(app).documents() == [] and not redis_client.keys("knowledge*")


@pytest.mark.parametrize("console_settings", [{"EMBEDDING_MODEL": "off"}], indirect=True)  # 200 chunks: words suffice here
def test_an_upload_may_be_larger_than_the_apps_64_kb_but_no_other_console_form(console_app, console) -> None:  # type: ignore[no-untyped-def]
    body = b"# Menu\n\n" + b"".join(b"## Dish %d\n\nA plate of grilled sardines with bread, number %d.\n\n" % (n, n)
                                    for n in range(1, 1300))
    assert len(body) > 80_000
    assert "Added menu (" in flashed(console, upload(console, "menu.md", body))
    response = post(console, f"{PAGE}/menu/remove", {"confirm": "menu", "padding": "x" * 100_000}, page=PAGE)
    assert "Nothing changed: the request was too large." in flashed(console, response)
    assert [d.id for d in library(console_app).documents()] == ["menu"]


def test_a_post_without_its_csrf_token_changes_nothing(console_app, console, redis_client) -> None:  # type: ignore[no-untyped-def]
    response = upload(console, "faq.md", FAQ, token=None)
    assert response.status_code == 400 and b"Nothing was changed" in response.data
    assert upload(console, "faq.md", FAQ, token="forged").status_code == 400
    assert not redis_client.keys("knowledge*")
    library(console_app).add(FAQ, source="faq.md", actor="test")
    response = console.post(f"{PAGE}/faq/remove", data={"confirm": "faq"})
    assert response.status_code == 400 and [d.id for d in library(console_app).documents()] == ["faq"]


def test_a_visitor_without_a_session_cannot_upload(anonymous, redis_client) -> None:  # type: ignore[no-untyped-def]
    response = anonymous.post(f"{PAGE}/documents", data={"file": (io.BytesIO(b"x" * 200_000), "big.md")},
                              content_type="multipart/form-data")
    assert response.status_code == 302 and response.headers["Location"].startswith("/console/signin")
    assert not redis_client.keys("knowledge*")


def test_remove_needs_the_id_typed_and_is_audited_with_the_operator(console_app, redis_client) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)
    client = console_app.test_client()
    assert sign_in(client, OPERATOR, PASSWORD).status_code == 302
    library(console_app).add(FAQ, source="faq.md", actor="test")
    page = flashed(client, post(client, f"{PAGE}/faq/remove", {"confirm": "FAQ"}, page=PAGE))
    assert "Nothing removed: type the document&#39;s id (faq) exactly to confirm." in page
    response = post(client, f"{PAGE}/faq/remove", {"confirm": "fa", "back": "document"}, page=PAGE)
    assert response.headers["Location"] == f"{PAGE}/faq#remove"
    assert [d.id for d in library(console_app).documents()] == ["faq"]
    with capture_logs() as logs:
        page = flashed(client, post(client, f"{PAGE}/faq/remove", {"confirm": " faq "}, page=PAGE))
    assert "Removed faq." in page and "No documents yet" in page and library(console_app).documents() == []
    (audit,) = audits(logs)
    assert audit["event"] == "audit.kb_removed" and audit["actor"] == f"console:{OPERATOR}" and audit["existed"]
    assert "There was no document faq." in flashed(client, post(client, f"{PAGE}/faq/remove", {"confirm": "faq"}, page=PAGE))
    assert console_app.test_client().get(f"{PAGE}/faq").status_code == 302  # not signed in: to sign-in


@pytest.mark.embeddings
def test_a_search_shows_what_would_be_injected_and_why(console_app, console) -> None:  # type: ignore[no-untyped-def]
    page = console.get(PAGE, query_string={"q": "When do you open on Sunday?"}).get_data(as_text=True)
    assert "Nothing would be given to the model: the knowledge base holds no documents." in page
    library(console_app).add(HOURS, source="hours.md", language="en", actor="test")
    library(console_app).add(FAQ, source="faq.md", language="en", actor="test")
    page = console.get(PAGE, query_string={"q": "When do you open on Sunday?"}).get_data(as_text=True)
    assert "Search: “When do you open on Sunday?”" in page and "Found by words and by meaning" in page
    injected = page.split("<h3>Given to the model")[1].split("<h3>Also looked at")[0]
    assert 'href="/console/knowledge/opening-hours#chunk-' in injected
    assert "On Sunday we open at 09:00 and close at 18:00." in injected
    considered = page.split("<h3>Also looked at")[1]
    assert '<span class="badge badge-ok">given</span>' in considered and "BM25" not in considered.split("<details")[0]
    assert '<th scope="col" class="num">BM25 rank</th>' in considered
    assert '<th scope="col" class="num">Similarity</th>' in considered  # the local model's columns

    assert "About the business</span>" in page and "about the business: margins" in page  # the gate's decision
    assert '<th scope="col" class="num">Gate margin</th>' in considered  # and the gate model's columns

    page = console.get(PAGE, query_string={"q": "Tell me a joke about penguins"}).get_data(as_text=True)
    assert "Nothing would be given to the model: not about the business: margins" in page
    assert "Not about the business</span>" in page and ">not about the business</span>" in page


def test_a_search_shows_the_reason_a_chunk_was_left_out(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, KNOWLEDGE_MIN_SCORE=5.0,
                                   EMBEDDING_MODEL="off"))
    client = app.test_client()
    sign_in(client)
    library(app).add(HOURS, source="hours.md", language="en", actor="test")
    page = client.get(PAGE, query_string={"q": "open on Sunday"}).get_data(as_text=True)
    assert "Nothing would be given to the model: no passage is a strong enough match (KNOWLEDGE_MIN_SCORE 5)." in page
    assert ">too weak a match</span>" in page and "a match below 5 (KNOWLEDGE_MIN_SCORE)" in page
    assert '<td class="key" data-label="Reason">below_min_score</td>' in page and ">Fused</th>" not in page


def test_the_document_page_shows_every_chunk_as_text(console_app, console) -> None:  # type: ignore[no-untyped-def]
    flashed(console, upload(console, "tricks.md", HOSTILE, title='<b onmouseover="x()">Tricks</b>'))
    (doc,) = library(console_app).documents()
    _, chunks = library(console_app).document(doc.id)
    page = console.get(f"{PAGE}/{doc.id}").get_data(as_text=True)
    for chunk in chunks:
        assert f'id="chunk-{chunk.id.rpartition("#")[2]}"' in page and f"{chunk.tokens} tokens" in page
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page and "<script>window" not in page
    assert "&lt;img src=x onerror=" in page and "<img src=x" not in page
    assert "&lt;b onmouseover=" in page and "<b onmouseover" not in page
    assert doc.sha256 in page and "Type " + doc.id + " to confirm" in page
    search = console.get(PAGE, query_string={"q": "<script>pwned markup</script>"}).get_data(as_text=True)
    assert "<script>pwned" not in search and "&lt;script&gt;pwned markup" in search
    for text in (page, search, console.get(PAGE).get_data(as_text=True)):
        assert re.search(r"<script(?![^>]*\bsrc=)", text) is None
        assert " style=" not in text and "<style" not in text and re.search(r"\son\w+=\"", text) is None


def test_an_unknown_document_is_a_404_page(console) -> None:  # type: ignore[no-untyped-def]
    for path in (f"{PAGE}/no-such-doc", f"{PAGE}/bad%20id!"):
        response = console.get(path)
        assert response.status_code == 404 and b"There is no such page." in response.data
    assert console.get(f"{PAGE}/documents").status_code == 404  # the upload's path, as a GET: a document's


def test_document_text_is_never_logged_at_info(console_app, console) -> None:  # type: ignore[no-untyped-def]
    secret = b"The safe code is 4711 and it sits behind the espresso machine."
    with capture_logs() as logs:
        flashed(console, upload(console, "staff.md", b"# Staff notes\n\n" + secret + b"\n"))
        console.get(PAGE, query_string={"q": "where is the safe code"})
        console.get(f"{PAGE}/staff-notes")
    assert logs and all("4711" not in repr(e) and "espresso" not in repr(e)
                        for e in logs if e.get("log_level") not in ("debug",))


def test_the_websites_are_listed_and_synced_on_demand(console_app, console, redis_client) -> None:  # type: ignore[no-untyped-def]
    from rq import Queue

    from bot.jobs.queue import FACTS_QUEUE
    from bot.storage.sites import PageRecord, SiteRecord, SiteStore

    page = console.get(PAGE).get_data(as_text=True)
    assert "No websites yet" in page and "kb add https://" in page
    assert "Nothing to sync" in flashed(console, post(console, f"{PAGE}/sites/sync", {}, page=PAGE))
    site = SiteRecord("shop-test", "https://shop.test/", "crawl", added_at=1.0, synced_at=1_700_000_000.0,
                      pages={"https://shop.test/": PageRecord("casa-lumi")},
                      errors=["https://shop.test/private/: disallowed by robots.txt"],
                      last={"added": 1, "changed": 0, "removed": 0})
    SiteStore(redis_client).put(site)
    page = console.get(PAGE).get_data(as_text=True)
    sites = page.split('id="sites"')[1].split("</section>")[0]
    assert "shop-test" in sites and "https://shop.test/" in sites and "its links" in sites
    assert '<td class="num" data-label="Pages">1</td>' in sites and "1 error</summary>" in sites
    assert "disallowed by robots.txt" in sites and "Synced every day" in sites
    before = Queue(FACTS_QUEUE, connection=console_app.extensions["bot.services"].jobs.connection).count
    assert "Sync queued" in flashed(console, post(console, f"{PAGE}/sites/sync", {}, page=PAGE))
    assert Queue(FACTS_QUEUE, connection=console_app.extensions["bot.services"].jobs.connection).count == before + 1
    # a form without its CSRF token changes nothing
    assert console.post(f"{PAGE}/sites/sync").status_code == 400
