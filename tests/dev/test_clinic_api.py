"""The stand-in clinic API over real HTTP: slots, booking once per Idempotency-Key, only the
caller's appointments, its OpenAPI document, bearer auth, and a clean stop as a process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime
from typing import Any, Iterator

import pytest
import yaml

from bot.dev.clinic_api import SEED_PHONE, ClinicApi, ClinicServer, openapi, serve, slot_times
from bot.dev.embedded import free_port
from bot.dev.processes import stop_process, tagged_env

pytestmark = pytest.mark.integration

TODAY = date(2030, 1, 7)  # a Monday; the seeded bookings are on Tuesday at 09:00 and 10:30
TUESDAY = "2030-01-08"
ANA = "+351922222222"
TOKEN = "clinic-test-token"


def stop(server: ClinicServer) -> None:
    """Shut the server down and wait for its thread to end."""
    server.shutdown()
    server.server_close()
    for thread in threading.enumerate():
        if thread.name == "clinic-api":
            thread.join(5)
    assert not [t for t in threading.enumerate() if t.name == "clinic-api"]


@pytest.fixture
def clinic() -> Iterator[ClinicServer]:
    """The clinic on a free port, today fixed, no token."""
    server = serve("127.0.0.1", free_port(), today=TODAY)
    yield server
    stop(server)


@pytest.fixture
def locked() -> Iterator[ClinicServer]:
    """The clinic with a bearer token."""
    server = serve("127.0.0.1", free_port(), token=TOKEN, today=TODAY)
    yield server
    stop(server)


def call(server: ClinicServer, method: str, path: str, body: Any = None, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """Send one request and return (status, JSON body)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json"
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            assert err.headers["Content-Type"] == "application/json"
            return err.code, json.loads(err.read())


def slots(server: ClinicServer, day: str, **headers: str) -> list[str]:
    status, body = call(server, "GET", f"/slots?day={day}", headers=headers)
    assert status == 200, body
    return body["slots"]


def book(server: ClinicServer, time: str, phone: str = ANA, key: str | None = None) -> tuple[int, Any]:
    headers = {"Idempotency-Key": key} if key else {}
    return call(server, "POST", "/appointments", {"phone": phone, "day": TUESDAY, "time": time,
                                                  "service": "cleaning", "name": "Ana"}, headers=headers)


def test_free_slots_leave_out_the_taken_and_a_booked_one(clinic: ClinicServer) -> None:
    free = slots(clinic, TUESDAY)
    assert free[:3] == ["09:30", "10:00", "11:00"] and "13:00" not in free and free[-1] == "17:30"
    assert len(free) == 16 - 2
    assert book(clinic, "14:30")[0] == 201
    assert "14:30" not in slots(clinic, TUESDAY)
    assert slots(clinic, "2030-01-12") == slot_times(date(2030, 1, 12))[:8]  # Saturday morning
    assert slots(clinic, "2030-01-13") == []  # closed on Sunday


def test_a_past_time_today_is_not_free() -> None:
    clinic = ClinicApi(today=TODAY, clock=lambda: datetime(2030, 1, 7, 11, 5))
    assert clinic.free_slots("2030-01-07", None)[1]["slots"][0] == "11:30"
    assert clinic.free_slots("2030-01-06", None)[1]["slots"] == []


@pytest.mark.parametrize("query", ["", "?day=tomorrow", "?day=2030-02-30", "?day=2030-01-08&service=braces"])
def test_a_bad_or_missing_day_is_400(clinic: ClinicServer, query: str) -> None:
    status, body = call(clinic, "GET", "/slots" + query)
    assert status == 400 and body["error"]


def test_the_same_idempotency_key_books_once(clinic: ClinicServer) -> None:
    first = book(clinic, "15:00", key="k-1")
    again = book(clinic, "15:00", key="k-1")
    assert first[0] == again[0] == 201 and first[1] == again[1]
    assert first[1]["status"] == "booked" and first[1]["service"] == "cleaning"
    mine = call(clinic, "GET", f"/appointments?phone=%2B{ANA[1:]}")[1]["appointments"]
    assert [a["id"] for a in mine] == [first[1]["id"]]
    assert book(clinic, "15:00", key="k-2")[0] == 409  # a new key is a new booking: the slot is taken
    status, body = book(clinic, "16:00", key="k-1")  # the key on another request is refused
    assert status == 422 and "16:00" not in json.dumps(call(clinic, "GET", f"/appointments?phone=%2B{ANA[1:]}"))


def test_a_taken_or_unknown_slot_is_409(clinic: ClinicServer) -> None:
    assert book(clinic, "09:00")[0] == 409  # seeded
    assert book(clinic, "13:30")[0] == 409  # lunch
    assert book(clinic, "09:15")[0] == 409  # not on the half hour
    assert book(clinic, "10:00")[0] == 201
    status, body = book(clinic, "10:00", phone="+351933333333")
    assert status == 409 and "10:00" in body["error"]


def test_racing_bookings_of_one_slot_book_it_once(clinic: ClinicServer) -> None:
    phones = [f"+35193000000{n}" for n in range(8)]
    with ThreadPoolExecutor(len(phones)) as pool:
        statuses = sorted(status for status, _ in pool.map(lambda phone: book(clinic, "17:30", phone), phones))
    assert statuses == [201] + [409] * (len(phones) - 1)


def test_my_appointments_are_only_mine(clinic: ClinicServer) -> None:
    book(clinic, "11:00")
    status, body = call(clinic, "GET", f"/appointments?phone=%2B{ANA[1:]}")
    assert status == 200 and [(a["phone"], a["time"]) for a in body["appointments"]] == [(ANA, "11:00")]
    seeded = call(clinic, "GET", f"/appointments?phone=%2B{SEED_PHONE[1:]}")[1]["appointments"]
    assert [a["time"] for a in seeded] == ["09:00", "10:30"]
    assert call(clinic, "GET", "/appointments")[0] == 400


def test_only_the_owner_cancels(clinic: ClinicServer) -> None:
    booked = book(clinic, "12:00")[1]
    path = f"/appointments/{booked['id']}?phone="
    assert call(clinic, "DELETE", path + "%2B351933333333")[0] == 404
    assert call(clinic, "DELETE", f"/appointments/apt-1?phone=%2B{ANA[1:]}")[0] == 404  # the seed's
    status, body = call(clinic, "DELETE", path + f"%2B{ANA[1:]}", headers={"Idempotency-Key": "c-1"})
    assert status == 200 and body == {**booked, "status": "cancelled"}
    assert call(clinic, "DELETE", path + f"%2B{ANA[1:]}", headers={"Idempotency-Key": "c-1"}) == (200, body)
    assert call(clinic, "DELETE", path + f"%2B{ANA[1:]}")[0] == 404  # no key: it is already cancelled
    assert call(clinic, "GET", f"/appointments?phone=%2B{ANA[1:]}")[1] == {"appointments": []}
    assert "12:00" in slots(clinic, TUESDAY)


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"phone": "+351922222222"}'])
def test_a_bad_body_is_400(clinic: ClinicServer, raw: bytes) -> None:
    status, body = call(clinic, "POST", "/appointments", raw=raw)
    assert status == 400 and body["error"]


def test_unknown_routes_are_json_404s_and_health_is_open(clinic: ClinicServer) -> None:
    assert call(clinic, "GET", "/nowhere")[0] == 404
    assert call(clinic, "PUT", "/appointments")[0] == call(clinic, "OPTIONS", "/slots")[0] == 404
    assert call(clinic, "GET", "/health") == (200, {"status": "ok"})


def test_the_request_log_and_reset(clinic: ClinicServer) -> None:
    book(clinic, "16:30", key="log-1")
    logged = call(clinic, "GET", "/_standin/requests")[1]["requests"]
    assert logged[-1]["method"] == "POST" and logged[-1]["path"] == "/appointments"
    assert logged[-1]["headers"]["Idempotency-Key"] == "log-1" and logged[-1]["body"]["time"] == "16:30"
    call(clinic, "GET", f"/slots?day={TUESDAY}")
    assert call(clinic, "GET", "/_standin/requests")[1]["requests"][-1]["query"] == {"day": TUESDAY}
    assert call(clinic, "POST", "/_standin/reset")[0] == 200
    assert call(clinic, "GET", "/_standin/requests")[1] == {"requests": []}
    assert "16:30" in slots(clinic, TUESDAY) and "09:00" not in slots(clinic, TUESDAY)


def test_the_document_is_valid_openapi(clinic: ClinicServer) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    with urllib.request.urlopen(clinic.url + "/openapi.json", timeout=10) as response:
        served = json.loads(response.read())
    with urllib.request.urlopen(clinic.url + "/openapi.yaml", timeout=10) as response:
        assert yaml.safe_load(response.read()) == served
    for doc in (served, openapi("http://127.0.0.1:1", bearer=True)):
        validator.validate(doc)
    assert served["openapi"] == "3.1.0" and served["servers"] == [{"url": clinic.url}]
    operations = {op["operationId"]: (method, path) for path, item in served["paths"].items()
                  for method, op in item.items()}
    assert operations == {"list_free_slots": ("get", "/slots"), "list_my_appointments": ("get", "/appointments"),
                          "book_appointment": ("post", "/appointments"),
                          "cancel_appointment": ("delete", "/appointments/{appointment_id}")}
    post = served["paths"]["/appointments"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/NewAppointment"}
    assert served["components"]["schemas"]["NewAppointment"]["properties"]["phone"]["x-bot-user"] is True
    assert [p.get("x-bot-user") for p in served["paths"]["/appointments"]["get"]["parameters"]] == [True]
    assert "security" not in served and "/health" not in served["paths"]


def test_the_bearer_token_is_required_when_set(locked: ClinicServer) -> None:
    assert call(locked, "GET", f"/slots?day={TUESDAY}")[0] == 401
    assert call(locked, "GET", f"/slots?day={TUESDAY}", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert call(locked, "POST", "/appointments", {"phone": ANA, "day": TUESDAY, "time": "17:00"})[0] == 401
    assert "17:00" in slots(locked, TUESDAY, Authorization=f"Bearer {TOKEN}")
    assert call(locked, "GET", "/health")[0] == 200
    doc = call(locked, "GET", "/openapi.json")[1]
    assert doc["security"] == [{"bearer": []}]
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_it_runs_as_a_module_and_stops_clean(sig: int) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bot.dev.clinic_api", "--port", str(port)],
                               env=tagged_env(), stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        assert f"http://127.0.0.1:{port}" in line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok"}
        process.send_signal(sig)
        assert process.wait(10) == 0
    finally:
        stop_process(process)  # type: ignore[arg-type]
        assert process.stdout is not None
        process.stdout.close()
