"""Who reaches the console: ADMIN_TOKEN turns it on, a session is needed for every page,
sign-in is rate-limited, every POST needs its CSRF token, and the headers are set."""

from __future__ import annotations

import re
import time

import pytest
from structlog.testing import capture_logs

from bot import create_app
from bot.exceptions import ConfigError
from bot.ops.console import session_key
from bot.storage.keys import SIGNIN_PREFIX
from tests.conftest import USER
from tests.ops.console.support import OPERATOR, PASSWORD, TOKEN, add_operator, csrf_token, post, sign_in

pytestmark = pytest.mark.integration


def console_rules(app) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """Return (method, path) of every console route, with sample values for its variables."""
    samples = {"e164": USER, "queue_name": "summaries", "ident": "summary-abc-def", "filename": "console.css",
               "rid": "a1b2c3"}
    out = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/console"):
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: samples[m.group(1)], rule.rule)
        out += [(method, path) for method in sorted(rule.methods - {"HEAD", "OPTIONS"})]
    return out


def test_the_console_is_off_without_an_admin_token(make_settings, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    client = create_app(make_settings()).test_client()
    for path in ("/console", "/console/", "/console/signin", "/console/users", f"/console/users/{USER}"):
        assert client.get(path).status_code == 404
    assert client.post("/console/signin", data={"password": "x" * 20}).status_code == 404


def test_every_route_sends_a_visitor_without_a_session_to_sign_in(console_app, anonymous) -> None:  # type: ignore[no-untyped-def]
    rules = console_rules(console_app)
    assert len(rules) >= 15  # the test sees the routes it guards
    public = {("GET", "/console/signin"), ("POST", "/console/signin"), ("GET", "/console/static/console.css")}
    for method, path in rules:
        if (method, path) in public:
            continue
        response = anonymous.open(path, method=method)
        assert response.status_code == 302, (method, path)
        assert response.headers["Location"].startswith("/console/signin"), (method, path)


def test_every_post_needs_its_csrf_token(console_app, console, redis_client) -> None:  # type: ignore[no-untyped-def]
    redis_client.hset(f"user_facts:{{{USER}}}", "name", '{"value": "Ana", "confidence": 0.9}')
    before = sorted(redis_client.scan_iter(match="*"))
    for method, path in console_rules(console_app):
        if method == "POST":
            response = console.post(path, data={"key": "name", "confirm": USER, "text": "hi"})
            assert response.status_code == 400, path
            assert b"Nothing was changed" in response.data
    assert sorted(redis_client.scan_iter(match="*")) == before
    assert console.get("/console/").status_code == 200  # still signed in: sign-out needed a token too


def test_the_webhook_status_callback_and_admin_api_take_no_csrf_token(console_app) -> None:  # type: ignore[no-untyped-def]
    client = console_app.test_client()
    admin = client.put(f"/admin/users/{USER}/task", json={"enabled": False}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert admin.status_code == 200
    assert client.post("/whatsapp", data={"Body": "hi"}).status_code == 403  # the signature, not CSRF, refuses it
    assert client.post("/whatsapp/status", data={}).status_code == 403


def test_the_admin_token_signs_in_as_admin_and_a_wrong_one_is_refused(anonymous) -> None:  # type: ignore[no-untyped-def]
    wrong = sign_in(anonymous, password="x" * len(TOKEN))
    assert wrong.status_code == 401 and b"Wrong name or password" in wrong.data
    assert anonymous.get("/console/").status_code == 302
    assert sign_in(anonymous).status_code == 302
    page = anonymous.get("/console/").get_data(as_text=True)
    assert "Signed in as <strong>admin</strong>" in page


def test_an_operator_signs_in_with_name_and_password(anonymous, redis_client) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)
    assert sign_in(anonymous, OPERATOR, "wrong password!").status_code == 401
    assert sign_in(anonymous, OPERATOR, TOKEN).status_code == 401  # the token is admin's only
    response = sign_in(anonymous, OPERATOR.upper(), PASSWORD)  # names are lower case
    assert response.status_code == 302
    assert f"Signed in as <strong>{OPERATOR}</strong>" in anonymous.get("/console/").get_data(as_text=True)
    stored = redis_client.hget("console_operators", OPERATOR)
    assert PASSWORD not in stored and "scrypt:" in stored


def test_sign_in_goes_back_to_the_page_asked_for_never_elsewhere(anonymous) -> None:  # type: ignore[no-untyped-def]
    asked = anonymous.get("/console/queues")
    assert asked.headers["Location"] == "/console/signin?next=/console/queues"
    for target, lands in (("/console/queues", "/console/queues"), ("https://evil.example/", "/console/"),
                          ("//evil.example/console/", "/console/"), ("/admin/org/facts", "/console/")):
        client = anonymous.application.test_client()
        token = csrf_token(client)
        response = client.post("/console/signin", data={"password": TOKEN, "next": target, "csrf_token": token})
        assert response.headers["Location"] == lands, target


@pytest.mark.cluster
def test_failed_sign_ins_are_limited_per_name_and_address_and_logged(console_settings, anonymous, redis_client) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)
    limit = console_settings.CONSOLE_SIGNIN_LIMIT
    with capture_logs() as logs:
        for _ in range(limit):
            assert sign_in(anonymous, OPERATOR, "not the password").status_code == 401
        refused = sign_in(anonymous, OPERATOR, PASSWORD)  # even the right password, now
    assert refused.status_code == 429 and b"Too many failed sign-ins" in refused.data
    failed = [e for e in logs if e["event"] == "console.signin_failed"]
    assert len(failed) == limit and failed[0]["name"] == OPERATOR and failed[0]["address"] == "127.0.0.x"
    assert [e["event"] for e in logs if e["event"] == "console.signin_limited"] == ["console.signin_limited"]
    assert PASSWORD not in str(logs) and "not the password" not in str(logs)
    (key,) = redis_client.scan_iter(match=f"{SIGNIN_PREFIX}*")
    assert 0 < redis_client.ttl(key) <= console_settings.CONSOLE_SIGNIN_WINDOW_S
    # another name from the same address is counted apart (the admin token still gets in)
    assert sign_in(anonymous).status_code == 302
    redis_client.delete(key)  # the window passed
    other = anonymous.application.test_client()
    assert sign_in(other, OPERATOR, PASSWORD).status_code == 302


def test_a_good_sign_in_clears_the_failures(anonymous, redis_client) -> None:  # type: ignore[no-untyped-def]
    assert sign_in(anonymous, password="nope-nope-nope").status_code == 401
    assert list(redis_client.scan_iter(match=f"{SIGNIN_PREFIX}*"))
    assert sign_in(anonymous).status_code == 302
    assert not list(redis_client.scan_iter(match=f"{SIGNIN_PREFIX}*"))


def test_sign_out_ends_the_session(console) -> None:  # type: ignore[no-untyped-def]
    response = post(console, "/console/signout")
    assert response.status_code == 302 and response.headers["Location"] == "/console/signin"
    assert console.get("/console/").status_code == 302


def test_a_session_ends_after_its_minutes_and_with_its_account(console_settings, console, redis_client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    later = time.time() + console_settings.CONSOLE_SESSION_MINUTES * 60 + 5
    monkeypatch.setattr(time, "time", lambda: later)
    assert console.get("/console/").status_code == 302
    monkeypatch.undo()
    add_operator(redis_client)
    client = console.application.test_client()
    assert sign_in(client, OPERATOR, PASSWORD).status_code == 302
    assert client.get("/console/").status_code == 200
    redis_client.hdel("console_operators", OPERATOR)  # `operators remove`
    assert client.get("/console/").status_code == 302


def test_the_session_cookie(console_app, make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    client = console_app.test_client()
    cookie = sign_in(client).headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # APP_ENV=development
    assert "Expires=" in cookie
    production = create_app(make_settings(APP_ENV="production", ADMIN_TOKEN=TOKEN, CONSOLE_SECRET="s" * 32))
    assert production.config["SESSION_COOKIE_SECURE"] is True
    assert production.config["PERMANENT_SESSION_LIFETIME"].total_seconds() == 3600


def test_production_needs_a_console_secret(make_settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="CONSOLE_SECRET"):
        create_app(make_settings(APP_ENV="production", ADMIN_TOKEN=TOKEN))
    create_app(make_settings(APP_ENV="production"))  # no ADMIN_TOKEN: no console, nothing needed
    development = make_settings(ADMIN_TOKEN=TOKEN)
    with capture_logs() as logs:
        derived = session_key(development)  # development: derived from the token, and said
    assert "console.secret_from_admin_token" in [e["event"] for e in logs]
    assert derived != session_key(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET="s" * 32))
    assert TOKEN.encode() not in derived


def test_security_headers_on_every_console_response(console, anonymous) -> None:  # type: ignore[no-untyped-def]
    for client, path in ((console, "/console/"), (console, "/console/users"), (anonymous, "/console/signin"),
                         (anonymous, "/console/static/console.css"), (console, "/console/no-such-page"),
                         (anonymous, "/console/users")):
        response = client.get(path)
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "form-action 'self'" in csp and "unsafe-inline" not in csp
        assert response.headers["Cache-Control"] == "no-store", path
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"


def test_no_inline_script_or_style_in_any_page(console, redis_client) -> None:  # type: ignore[no-untyped-def]
    redis_client.hset(f"chat_context:{{{USER}}}", mapping={"summary": "s", "last_interaction_timestamp": time.time()})
    for path in ("/console/", "/console/users", f"/console/users/{USER}", "/console/queues"):
        page = console.get(path).get_data(as_text=True)
        assert re.search(r"<script(?![^>]*\bsrc=)", page) is None, path
        assert " style=" not in page and "<style" not in page, path
        assert re.search(r"\son\w+=", page) is None, path  # no inline event handlers
        assert "http://" not in page and "https://" not in page, path  # nothing from a CDN
