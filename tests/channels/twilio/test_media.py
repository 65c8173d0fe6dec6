"""Fetching Twilio media: only our account's Media URLs, credentials to the API origin only,
size, time and redirects capped. Real HTTP on 127.0.0.1 to the Twilio stand-in (its API and
its CDN on another port), and to small recording servers."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.channels.twilio.media import MediaFetcher, httpx
from bot.dev import twilio_standin
from bot.dev.twilio_standin import MediaBehaviour, TwilioStandin
from bot.exceptions import MediaUnavailable
from tests.conftest import ACCOUNT, AUTH_TOKEN, BUSY_SLACK_S

MESSAGE = "MM" + "3" * 32
MEDIA = "ME" + "4" * 32
OGG = b"OggS" + bytes(range(256)) * 4
MB = 1024 * 1024


def basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class Recorder:
    """A tiny HTTP(S) server that records each request and answers 200, or a redirect."""

    def __init__(self, location: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.hits: list[dict[str, Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                recorder.hits.append({"path": self.path, "authorization": self.headers.get("Authorization")})
                self.send_response(307 if location else 200)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "1")
                self.end_headers()
                self.wfile.write(b"x")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def make_fetcher(twilio: TwilioStandin) -> Iterator[Callable[..., MediaFetcher]]:
    """make(**options) -> a MediaFetcher of ACCOUNT on the stand-in; closed at teardown."""
    made: list[MediaFetcher] = []

    def make(base: str | None = None, account: str | None = ACCOUNT, user: str = ACCOUNT,
             secret: str = AUTH_TOKEN, **options: Any) -> MediaFetcher:
        made.append(MediaFetcher(base or twilio.url, account, user, secret, **options))
        return made[-1]

    yield make
    for fetcher in made:
        fetcher.close()


@pytest.fixture
def fetcher(make_fetcher: Callable[..., MediaFetcher]) -> MediaFetcher:
    return make_fetcher()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


def fail(fetcher: MediaFetcher, url: str, message: str = MESSAGE, max_bytes: int = MB,
         deadline_s: float = 3.0) -> tuple[MediaUnavailable, float]:
    """Fetch, expecting MediaUnavailable; return it and the seconds the call took."""
    started = time.monotonic()
    with pytest.raises(MediaUnavailable) as caught:
        fetcher.fetch(url, message, max_bytes=max_bytes, deadline_s=deadline_s)
    return caught.value, time.monotonic() - started


# -- the way Twilio serves media -----------------------------------------------------------
def test_the_media_comes_through_twilios_redirect(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, OGG, "Audio/OGG; codecs=opus")
    media = fetcher.fetch(url, MESSAGE, max_bytes=MB, deadline_s=3.0)
    assert media.data == OGG and media.content_type == "audio/ogg; codecs=opus" and media.redirects == 1


def test_credentials_go_to_the_api_origin_only(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    fetcher.fetch(twilio.add_media(MESSAGE, OGG, "audio/ogg"), MESSAGE, max_bytes=MB, deadline_s=3.0)
    api, cdn = twilio.hits()
    assert api["server"] == "api" and api["authorization_value"] == basic(ACCOUNT, AUTH_TOKEN)
    assert cdn["server"] == "cdn" and cdn["authorization"] is False


def test_an_api_key_pair_is_accepted(make_fetcher: Callable[..., MediaFetcher]) -> None:
    key = ("SK" + "5" * 32, "api-key-secret")
    standin = TwilioStandin(ACCOUNT, AUTH_TOKEN, api_key=key).start()
    try:
        url = standin.add_media(MESSAGE, OGG, "audio/ogg")
        media = make_fetcher(base=standin.url, user=key[0], secret=key[1]).fetch(url, MESSAGE, max_bytes=MB,
                                                                                 deadline_s=3.0)
        assert media.data == OGG and standin.hits()[0]["authorization_value"] == basic(*key)
    finally:
        standin.stop()


def test_a_redirect_back_to_the_api_origin_gets_no_credentials(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg")
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg", MediaBehaviour(api_location=url))
    err, _ = fail(fetcher, url)
    assert err.reason == "unauthorized" and not err.refused  # the stand-in wanted credentials there
    first, second = twilio.hits()
    assert first["authorization"] and not second["authorization"]


# -- refused before any request ------------------------------------------------------------
def test_a_foreign_origin_is_never_requested(fetcher: MediaFetcher, recorder: Recorder) -> None:
    url = f"http://127.0.0.1:{recorder.port}/2010-04-01/Accounts/{ACCOUNT}/Messages/{MESSAGE}/Media/{MEDIA}"
    with capture_logs() as logs:
        err, _ = fail(fetcher, url)
    assert err.reason == "foreign_origin" and err.refused and recorder.hits == []
    assert logs == [{"event": "media.refused", "log_level": "warning", "reason": "foreign_origin",
                     "host": "127.0.0.1"}]


def media_path(account: str = ACCOUNT, message: str = MESSAGE, media: str = MEDIA) -> str:
    return f"/2010-04-01/Accounts/{account}/Messages/{message}/Media/{media}"


@pytest.mark.parametrize(("tail", "reason"), [
    (media_path(account="AC" + "9" * 32), "other_account"),
    (media_path(message="MM" + "9" * 32), "other_message"),
    (media_path() + "?Foo=1", "bad_url"),
    (media_path() + "?", "bad_url"),
    (media_path() + "#x", "bad_url"),
    (media_path() + "/", "bad_url"),
    (media_path(media="%4D%45" + "4" * 32), "bad_url"),  # "ME" percent-encoded
    (f"/2010-04-01/Accounts/{ACCOUNT}/Messages/{'MM' + '9' * 32}/../{MESSAGE}/Media/{MEDIA}", "bad_url"),
    (f"/2010-04-01/Accounts/{ACCOUNT}/Messages/{MESSAGE}/./Media/{MEDIA}", "bad_url"),
    ("//" + media_path()[1:], "bad_url"),
    (media_path().replace("/Media/", "\\Media\\"), "bad_url"),
    (media_path() + ".json", "not_media"),
    (f"/2010-04-01/Accounts/{ACCOUNT}/Messages/{MESSAGE}/Media", "not_media"),
    (f"/2010-04-01/Accounts/{ACCOUNT}/Messages/{MESSAGE}", "not_media"),
    (f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json", "not_media"),
    (media_path(media="ME" + "4" * 31), "not_media"),
    (media_path(message="x"), "other_message"),
])
def test_anything_but_a_media_url_of_this_message_is_refused_unrequested(
        twilio: TwilioStandin, fetcher: MediaFetcher, tail: str, reason: str) -> None:
    twilio.add_media(MESSAGE, OGG, "audio/ogg")
    err, _ = fail(fetcher, twilio.url + tail)
    assert (err.reason, err.refused) == (reason, True)
    assert twilio.hits() == []


@pytest.mark.parametrize("make_url", [
    lambda base: base.replace("http://", f"http://{ACCOUNT}:{AUTH_TOKEN}@"),  # userinfo
    lambda base: base.replace("http://", "http://api.twilio.com@"),
    lambda base: base.replace("http://", "https://"),  # the same host, another scheme
    lambda base: base.replace("127.0.0.1", "localhost"),  # the same place, another origin
    lambda base: base.replace("http://", "ftp://"),
    lambda base: base.replace("127.0.0.1", "127.0.0.1 "),
    lambda base: "https://api.twilio.com",
])
def test_another_origin_or_userinfo_is_refused_unrequested(
        twilio: TwilioStandin, fetcher: MediaFetcher, make_url: Callable[[str], str]) -> None:
    err, _ = fail(fetcher, make_url(twilio.url) + media_path())
    assert err.refused and err.reason in ("foreign_origin", "bad_url")
    assert twilio.hits() == []


def test_without_an_account_every_url_is_refused(twilio: TwilioStandin,
                                                 make_fetcher: Callable[..., MediaFetcher]) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg")
    err, _ = fail(make_fetcher(account=None, user="", secret=""), url)
    assert (err.reason, err.refused) == ("no_account", True) and twilio.hits() == []


def test_origins_are_compared_normalized(make_fetcher: Callable[..., MediaFetcher]) -> None:
    fetcher = make_fetcher(base="https://api.twilio.com/")
    fetcher.check("HTTPS://API.Twilio.com:443" + media_path(), MESSAGE)  # the same origin
    for other in ("https://api.twilio.com:8443", "http://api.twilio.com", "https://api.twilio.com.evil.example"):
        with pytest.raises(MediaUnavailable) as caught:
            fetcher.check(other + media_path(), MESSAGE)
        assert (caught.value.reason, caught.value.refused) == ("foreign_origin", True)


# -- Twilio's errors ---------------------------------------------------------------------
@pytest.mark.parametrize(("behaviour", "secret", "reason", "detail"), [
    (MediaBehaviour(api_status=401), AUTH_TOKEN, "unauthorized", "401"),
    (MediaBehaviour(), "a wrong token", "unauthorized", "401"),
    (MediaBehaviour(api_status=404), AUTH_TOKEN, "not_found", "404"),
    (MediaBehaviour(api_status=500), AUTH_TOKEN, "http_status", "500"),
])
def test_api_errors(twilio: TwilioStandin, make_fetcher: Callable[..., MediaFetcher], behaviour: MediaBehaviour,
                    secret: str, reason: str, detail: str) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg", behaviour)
    err, _ = fail(make_fetcher(secret=secret), url)
    assert (err.reason, str(err), err.refused) == (reason, f"{reason}: {detail}", False)
    assert [h["server"] for h in twilio.hits()] == ["api"]


def test_an_unknown_media_item_is_not_found(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    err, _ = fail(fetcher, twilio.url + media_path())
    assert err.reason == "not_found" and not err.refused


def test_an_empty_file_is_not_media(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    err, _ = fail(fetcher, twilio.add_media(MESSAGE, b"", "audio/ogg"))
    assert err.reason == "empty"


# -- size ------------------------------------------------------------------------------
def test_too_large_by_content_length_without_reading_the_body(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    # It announces 10 MB, sends 10 bytes and stalls: reading any of the body would hit the deadline.
    slow = MediaBehaviour(content_length=10 * MB, piece_bytes=10, piece_gap_s=30)
    err, elapsed = fail(fetcher, twilio.add_media(MESSAGE, OGG, "audio/ogg", slow), max_bytes=MB, deadline_s=3.0)
    assert err.reason == "too_large" and elapsed < 3.0  # reading the body would have stalled to the deadline


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_too_large_while_streaming_stops_reading(twilio: TwilioStandin, fetcher: MediaFetcher, framing: Any) -> None:
    # No Content-Length: 2,000 bytes in 100-byte pieces 0.5 s apart (10 s); the cap is passed at 1 s,
    # and a fetcher that read on would meet its deadline (30 s) as "timeout", not "too_large".
    trickle = MediaBehaviour(framing=framing, piece_bytes=100, piece_gap_s=0.5)
    err, _ = fail(fetcher, twilio.add_media(MESSAGE, b"7" * 2000, "image/jpeg", trickle), max_bytes=250,
                  deadline_s=30.0)
    assert err.reason == "too_large"


def test_the_cap_is_inclusive(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    chunked = MediaBehaviour(framing="chunked", piece_bytes=100)
    url = twilio.add_media(MESSAGE, b"7" * 1000, "image/jpeg", chunked)
    assert len(fetcher.fetch(url, MESSAGE, max_bytes=1000, deadline_s=3.0).data) == 1000
    err, _ = fail(fetcher, url, max_bytes=999)
    assert err.reason == "too_large"


def test_a_small_lying_content_length_gives_only_that_many_bytes(twilio: TwilioStandin,
                                                                  fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, b"7" * 5000, "image/jpeg", MediaBehaviour(content_length=10))
    assert fetcher.fetch(url, MESSAGE, max_bytes=100, deadline_s=3.0).data == b"7" * 10


# -- time ------------------------------------------------------------------------------
class HiddenSocketTransport(httpx.HTTPTransport):  # type: ignore[misc, name-defined]
    """A real transport whose responses do not show their connection (as a custom one may not)."""

    def handle_request(self, request: Any) -> Any:
        response = super().handle_request(request)
        response.extensions = {k: v for k, v in response.extensions.items() if k != "network_stream"}
        return response


@pytest.mark.parametrize("transport", [None, HiddenSocketTransport], ids=["watchdog", "clock"])
def test_a_trickling_cdn_stops_at_the_deadline(twilio: TwilioStandin, make_fetcher: Callable[..., MediaFetcher],
                                               transport: Any) -> None:
    fetcher = make_fetcher(transport=transport and transport())
    trickle = MediaBehaviour(piece_bytes=10, piece_gap_s=0.05)  # 10,000 bytes in 50 s, each read quick
    err, elapsed = fail(fetcher, twilio.add_media(MESSAGE, b"7" * 10_000, "image/jpeg", trickle), deadline_s=1.0)
    assert err.reason == "timeout" and elapsed < 1.0 + BUSY_SLACK_S  # not the 50 s trickle
    assert fetcher.fetch(twilio.add_media(MESSAGE, OGG, "audio/ogg"), MESSAGE, max_bytes=MB, deadline_s=3.0).data == OGG


def test_a_body_that_stalls_stops_at_the_deadline_not_a_read_timeout_later(
        twilio: TwilioStandin, make_fetcher: Callable[..., MediaFetcher]) -> None:
    # The CDN's request starts with 2 s left, so each of its reads may wait 2 s: headers at 1.5 s,
    # 100 bytes, then nothing. httpx alone would give up at 3.5 s.
    stall = MediaBehaviour(cdn_delay_s=1.5, piece_bytes=100, piece_gap_s=30)
    err, elapsed = fail(make_fetcher(read_timeout_s=10.0), twilio.add_media(MESSAGE, b"7" * 200, "image/jpeg", stall),
                        deadline_s=2.0)
    assert err.reason == "timeout" and elapsed < 2.0 + 1.0  # before httpx's own 3.5 s


def test_a_cdn_slow_to_answer_stops_at_the_deadline(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg", MediaBehaviour(cdn_delay_s=30))
    err, elapsed = fail(fetcher, url, deadline_s=1.0)
    assert err.reason == "timeout" and elapsed < 1.0 + BUSY_SLACK_S  # not the 30 s the CDN takes


# -- connections and redirects -----------------------------------------------------------
def test_a_connection_cut_mid_body(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, b"7" * 1000, "image/jpeg", MediaBehaviour(cut_after=50))
    err, _ = fail(fetcher, url)
    assert err.reason == "connection" and not err.refused


def test_a_refused_connection(make_fetcher: Callable[..., MediaFetcher]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{probe.getsockname()[1]}"
    err, _ = fail(make_fetcher(base=base), base + media_path())
    assert err.reason == "connection"


def test_redirects_are_capped(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    three = twilio.add_media(MESSAGE, OGG, "audio/ogg", MediaBehaviour(cdn_redirects=2))  # relative Locations
    assert fetcher.fetch(three, MESSAGE, max_bytes=MB, deadline_s=3.0).redirects == 3
    before = len(twilio.hits())
    err, _ = fail(fetcher, twilio.add_media(MESSAGE, OGG, "audio/ogg", MediaBehaviour(cdn_redirects=100)))
    assert err.reason == "too_many_redirects"
    assert [h["server"] for h in twilio.hits()[before:]] == ["api", "cdn", "cdn", "cdn"]


@pytest.mark.parametrize("location", [
    "file:///etc/passwd",
    "ftp://127.0.0.1/media",
    "http://user:secret@127.0.0.1:{cdn}/media/x",
    "http://127.0.0.1:{cdn}/media/x y",
])
def test_a_redirect_anywhere_but_plain_http_s_is_refused(twilio: TwilioStandin, fetcher: MediaFetcher,
                                                         location: str) -> None:
    cdn = twilio.cdn_url.rsplit(":", 1)[1]
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg", MediaBehaviour(api_location=location.format(cdn=cdn)))
    err, _ = fail(fetcher, url)
    assert err.reason == "insecure_redirect" and [h["server"] for h in twilio.hits()] == ["api"]


@pytest.fixture
def tls_context(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: (the server's context, a client's that trusts it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


def test_https_is_never_downgraded_to_http(tls_context: tuple[ssl.SSLContext, ssl.SSLContext],
                                           recorder: Recorder) -> None:
    server_tls, client_tls = tls_context
    api = Recorder(location=f"http://127.0.0.1:{recorder.port}/media/x", tls=server_tls)  # Twilio's API, over TLS
    base = f"https://127.0.0.1:{api.port}"
    fetcher = MediaFetcher(base, ACCOUNT, ACCOUNT, AUTH_TOKEN, transport=httpx.HTTPTransport(verify=client_tls))
    try:
        err, _ = fail(fetcher, base + media_path(media=MEDIA))
        assert err.reason == "insecure_redirect"
        assert [h["authorization"] for h in api.hits] == [basic(ACCOUNT, AUTH_TOKEN)] and recorder.hits == []
    finally:
        fetcher.close()
        api.stop()


# -- logs ------------------------------------------------------------------------------
def test_logs_name_the_host_never_the_path_or_credentials(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg")
    with capture_logs() as logs:
        fetcher.fetch(url, MESSAGE, max_bytes=MB, deadline_s=3.0)
        errors = [fail(fetcher, twilio.url + media_path())[0], fail(fetcher, url, message="MM" + "8" * 32)[0]]
    fetched, failed, refused = logs
    assert fetched["event"] == "media.fetched" and fetched["bytes"] == len(OGG) and fetched["redirects"] == 1
    assert isinstance(fetched["duration_ms"], int)
    assert (failed["event"], failed["reason"], failed["status"], failed["host"]) == (
        "media.fetch_failed", "not_found", 404, "127.0.0.1")
    assert (refused["event"], refused["reason"], refused["host"]) == ("media.refused", "other_message", "127.0.0.1")
    said = json.dumps(logs) + " ".join(str(e) for e in errors)
    media_sid = url.rsplit("/", 1)[1]
    for secret in (ACCOUNT, MESSAGE, MEDIA, media_sid, AUTH_TOKEN, "/2010-04-01", "/media/"):
        assert secret not in said


# -- the stand-in itself ---------------------------------------------------------------------
def test_the_upload_endpoint_serves_a_file_from_another_process(twilio: TwilioStandin, fetcher: MediaFetcher) -> None:
    request = urllib.request.Request(f"{twilio.url}/_standin/media?message_sid={MESSAGE}", data=OGG,
                                      headers={"Content-Type": "audio/ogg"})
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - the local stand-in
        url = json.loads(response.read())["url"]
    media = fetcher.fetch(url, MESSAGE, max_bytes=MB, deadline_s=3.0)
    assert (media.data, media.content_type) == (OGG, "audio/ogg")


def test_the_cdn_refuses_credentials_as_s3_does(twilio: TwilioStandin) -> None:
    url = twilio.add_media(MESSAGE, OGG, "audio/ogg")
    auth = {"Authorization": basic(ACCOUNT, AUTH_TOKEN)}
    with pytest.raises(urllib.error.HTTPError) as caught:  # urllib repeats headers on a redirect
        urllib.request.urlopen(urllib.request.Request(url, headers=auth), timeout=5)  # noqa: S310
    assert caught.value.code == 400
    caught.value.close()


def test_stop_stops_both_servers() -> None:
    standin = TwilioStandin(ACCOUNT, AUTH_TOKEN).start()
    ports = [standin.server.server_address[1], standin.cdn.server_address[1]]
    standin.stop()
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_the_standin_refuses_to_run_in_production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_ENV", "production")
    assert twilio_standin.main(["--port", "0", "--account-sid", ACCOUNT, "--auth-token", AUTH_TOKEN]) == 2
