"""The business's tools: an OpenAPI document read into tools, and calls sent on its one
origin, against the stand-in clinic API and small hostile servers, over real HTTP."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
import yaml

from bot.dev.clinic_api import openapi
from bot.dev.embedded import free_port
from bot.tools.caller import ToolCaller, fetch_document
from bot.tools.openapi import ToolBook, ToolsConfigError, parse_document, tool_book

pytestmark = pytest.mark.integration

ANA, RUI = "+351922222222", "+351933333333"


def requests_seen(url: str) -> list[dict[str, Any]]:
    from urllib.request import urlopen

    return json.loads(urlopen(f"{url}/_standin/requests", timeout=5).read())["requests"]


def test_every_operation_becomes_a_tool_with_refs_resolved_and_the_caller_hidden(clinic) -> None:  # type: ignore[no-untyped-def]
    _, url = clinic
    book = tool_book(parse_document(fetch_document(f"{url}/openapi.json", timeout_s=5)))
    assert book.base_url == url and set(book.tools) == {
        "list_free_slots", "list_my_appointments", "book_appointment", "cancel_appointment"}
    book_it = book.tools["book_appointment"]
    assert book_it.write and book_it.confirm and book_it.method == "POST"
    assert "phone" not in book_it.parameters["properties"]  # x-bot-user: never the model's
    assert "Idempotency-Key" not in book_it.parameters["properties"]  # the bot's own header
    assert book_it.parameters["properties"]["time"]["pattern"] == "^[0-9]{2}:[0-9]{2}$"  # a $ref, resolved
    assert set(book_it.parameters["required"]) == {"day", "time"}
    assert [a.name for a in book_it.user_arguments] == ["phone"]
    assert not book.tools["list_free_slots"].write
    cancel = book.tools["cancel_appointment"]
    assert cancel.parameters["required"] == ["appointment_id"] and "phone" not in cancel.parameters["properties"]
    assert cancel.for_model()["function"]["name"] == "cancel_appointment"


def test_the_yaml_document_reads_the_same_and_an_operator_base_url_wins(clinic) -> None:  # type: ignore[no-untyped-def]
    _, url = clinic
    from_yaml = tool_book(parse_document(fetch_document(f"{url}/openapi.yaml", timeout_s=5)),
                          base_url="http://127.0.0.1:9/api/")
    assert from_yaml.base_url == "http://127.0.0.1:9/api" and len(from_yaml.tools) == 4


def test_x_bot_confirm_false_makes_a_write_run_without_asking() -> None:
    doc = openapi("http://127.0.0.1:9")
    doc["paths"]["/appointments"]["post"]["x-bot-confirm"] = False
    assert not tool_book(doc).tools["book_appointment"].confirm


@pytest.mark.parametrize("document, why", [
    ({"openapi": "3.1.0"}, "not valid"),
    ({"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}, "only OpenAPI 3.0 and 3.1"),
    ({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}}, "base URL"),
])
def test_a_bad_document_is_refused_with_its_reason(document: dict[str, Any], why: str) -> None:
    with pytest.raises(ToolsConfigError, match=why):
        tool_book(document)


def test_an_operation_without_a_usable_id_is_left_out_and_said() -> None:
    doc = openapi("http://127.0.0.1:9")
    doc["paths"]["/slots"]["get"]["operationId"] = "free slots?"
    book = tool_book(doc)
    assert "list_free_slots" not in book.tools and any("operationId" in why for why in book.skipped)


def test_broken_yaml_is_refused() -> None:
    with pytest.raises(ToolsConfigError, match="neither JSON nor YAML"):
        parse_document(b"openapi: [3.1\n  info: {")


def test_a_read_runs_for_the_caller_only_whatever_number_the_model_names(clinic) -> None:  # type: ignore[no-untyped-def]
    _, url = clinic
    book = tool_book(openapi(url))
    caller = ToolCaller(book, timeout_s=5)
    booked = caller.call(book.tools["book_appointment"], {"day": "2030-01-09", "time": "10:00"}, ANA,
                         idempotency_key="act-1")
    assert booked.ok and booked.status == 201 and booked.data["phone"] == ANA
    mine = caller.call(book.tools["list_my_appointments"], {"phone": RUI}, ANA)  # the model tries another number
    assert mine.ok and [a["phone"] for a in mine.data["appointments"]] == [ANA]
    assert requests_seen(url)[-1]["query"]["phone"] == ANA
    slots = caller.call(book.tools["list_free_slots"], {"day": "2030-01-09"}, ANA)
    assert slots.ok and "10:00" not in slots.data["slots"] and "10:30" in slots.data["slots"]
    caller.close()


def test_a_write_carries_its_key_and_the_same_key_books_once(clinic) -> None:  # type: ignore[no-untyped-def]
    _, url = clinic
    book = tool_book(openapi(url))
    caller = ToolCaller(book, timeout_s=5)
    tool = book.tools["book_appointment"]
    first = caller.call(tool, {"day": "2030-01-09", "time": "11:00", "phone": RUI}, ANA, idempotency_key="act-7")
    again = caller.call(tool, {"day": "2030-01-09", "time": "11:00"}, ANA, idempotency_key="act-7")
    assert first.data == again.data and first.data["phone"] == ANA
    posts = [r for r in requests_seen(url) if r["method"] == "POST"]
    assert [r["headers"].get("Idempotency-Key") for r in posts] == ["act-7", "act-7"]
    assert caller.call(tool, {"day": "2030-01-09", "time": "11:30"}, ANA).outcome == "refused"  # no key, no write
    mine = caller.call(book.tools["list_my_appointments"], {}, ANA)
    assert len(mine.data["appointments"]) == 1
    caller.close()


def test_a_path_value_is_quoted_and_cannot_leave_the_path(clinic) -> None:  # type: ignore[no-untyped-def]
    _, url = clinic
    book = tool_book(openapi(url))
    caller = ToolCaller(book, timeout_s=5)
    result = caller.call(book.tools["cancel_appointment"], {"appointment_id": "../slots?day=2030-01-09"}, ANA,
                         idempotency_key="act-9")
    assert result.outcome == "http_error" and result.status == 404
    assert requests_seen(url)[-1]["path"].startswith("/appointments/")
    caller.close()


class Hostile(BaseHTTPRequestHandler):
    """Answers by path: a redirect elsewhere, a huge body, HTML, a slow answer, a 503."""

    seen: list[dict[str, str]] = []
    document: dict[str, Any] = {}  # the OpenAPI document the fixture serves it under

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        Hostile.seen.append({"path": self.path, "auth": self.headers.get("Authorization", "")})
        path = self.path.split("?")[0]
        if path == "/away":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2:9/steal")
            self.end_headers()
        elif path == "/badport":  # a Location that is not a URL at all
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:notaport/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/here":
            self.send_response(302)
            self.send_header("Location", "/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/json":
            self._send(200, b'{"ok": true}', "application/json")
        elif path == "/huge":
            self._send(200, b'{"x": "' + b"a" * (10 * 1024 * 1024) + b'"}', "application/json")
        elif path == "/html":
            self._send(200, b"<html>hi</html>", "text/html")
        elif path == "/slow":
            time.sleep(3)
            self._send(200, b"{}", "application/json")
        else:
            self._send(503, b'{"error": "down"}', "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass


@pytest.fixture()
def hostile() -> Iterator[ToolBook]:
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    Hostile.seen = []
    doc = {"openapi": "3.1.0", "info": {"title": "h", "version": "1"}, "servers": [{"url": f"http://127.0.0.1:{port}"}],
           "paths": {f"/{name}": {"get": {"operationId": name, "responses": {"200": {"description": "ok"}}}}
                     for name in ("away", "badport", "here", "huge", "html", "slow", "down")}}
    Hostile.document = doc
    try:
        yield tool_book(doc)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("name, outcome", [
    ("away", "refused"), ("badport", "refused"), ("huge", "too_large"), ("html", "not_json"), ("slow", "timeout"), ("down", "http_error"),
])
def test_a_hostile_or_broken_api_gives_an_outcome_never_an_exception(hostile: ToolBook, name: str, outcome: str) -> None:
    caller = ToolCaller(hostile, timeout_s=1.0, max_bytes=256 * 1024, auth_header="Authorization: Bearer s3cret")
    result = caller.call(hostile.tools[name], {}, ANA)
    caller.close()
    assert result.outcome == outcome
    assert all(seen["path"] != "/steal" for seen in Hostile.seen)


@pytest.mark.parametrize("name", ["away", "huge", "html", "slow", "down"])
def test_whatever_the_api_does_the_user_gets_a_reply_and_never_a_5xx(  # type: ignore[no-untyped-def]
        hostile: ToolBook, name: str, make_settings, redis_client, model, tmp_path) -> None:
    from bot import create_app
    from tests.conftest import inbound_form, sign

    document = tmp_path / "api.json"
    document.write_text(json.dumps(Hostile.document))
    client = create_app(make_settings(TOOLS_OPENAPI=str(document), TOOLS_TIMEOUT_S=1.0)).test_client()
    model.script({"tool_calls": [{"name": name, "arguments": {}}]})
    form = inbound_form("What do you have for me?", ANA)
    response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 200 and "<Message>" in response.get_data(as_text=True)
    told = next(m for m in model.requests()[-1]["messages"] if m.get("role") == "tool")["content"]
    assert '"outcome":"' in told and '"outcome":"ok"' not in told  # the model is told what went wrong


def test_a_read_is_tried_once_more_after_a_5xx_and_a_same_origin_redirect_is_followed(hostile: ToolBook) -> None:
    caller = ToolCaller(hostile, timeout_s=2.0, auth_header="Authorization: Bearer s3cret")
    down = caller.call(hostile.tools["down"], {}, ANA)
    here = caller.call(hostile.tools["here"], {}, ANA)
    caller.close()
    assert down.attempts == 2 and [s["path"] for s in Hostile.seen[:2]] == ["/down", "/down"]
    assert here.ok and here.data == {"ok": True}
    assert {s["auth"] for s in Hostile.seen} == {"Bearer s3cret"}  # the origin's own credentials, only there


def test_the_cli_lists_and_checks_without_redis(clinic, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from bot.ops.commands import main

    _, url = clinic
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["tools", "list", "--openapi", f"{url}/openapi.json"]) == 0
    out = capsys.readouterr().out
    assert "book_appointment" in out and "write, asks first" in out and "caller's number: phone" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"openapi": "3.1.0"}))
    assert main(["tools", "check", "--openapi", str(bad)]) == 2
    assert "not valid" in capsys.readouterr().err
