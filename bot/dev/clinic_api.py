"""A stand-in business API for a small dental clinic: free slots, the caller's appointments,
booking and cancelling, on 127.0.0.1, described by an OpenAPI 3.1 document that the bot turns
into tools. State is in memory; writes honour an `Idempotency-Key` header, so a retried call
books or cancels once. Tests read what it was sent at /_standin/requests.

    .venv/bin/python -m bot.dev.clinic_api --port 8790 [--token SECRET]
"""

from __future__ import annotations

import argparse
import hmac
import json
import re
import signal
import threading
from dataclasses import asdict, dataclass
from datetime import date, datetime, time, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote, urlsplit

SERVICES = ["checkup", "cleaning", "filling", "whitening"]  # each takes one slot
SLOT_MINUTES = 30
#: Opening hours by weekday (Monday is 0): two sessions on weekdays, a morning on Saturday.
_WEEKDAY = [("09:00", "13:00"), ("14:00", "18:00")]
HOURS: dict[int, list[tuple[str, str]]] = {0: _WEEKDAY, 1: _WEEKDAY, 2: _WEEKDAY, 3: _WEEKDAY, 4: _WEEKDAY,
                                           5: [("09:00", "13:00")]}
#: How far ahead the clinic books (its diary is open for the next eight weeks).
HORIZON_DAYS = 56
SEED_PHONE = "+351911111111"
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_TIME = re.compile(r"^[0-9]{2}:[0-9]{2}$")
_PHONE = r"^\+?[0-9]{6,15}$"

Result = tuple[int, dict[str, Any]]


def slot_times(day: date) -> list[str]:
    """Return the day's slots as HH:MM, open or taken (none on Sunday)."""
    slots = []
    for start, end in HOURS.get(day.weekday(), []):
        at = datetime.combine(day, time.fromisoformat(start))
        while at.time() < time.fromisoformat(end):
            slots.append(at.strftime("%H:%M"))
            at += timedelta(minutes=SLOT_MINUTES)
    return slots


def _error(status: int, message: str) -> Result:
    return status, {"error": message}


@dataclass
class Appointment:
    """One booking; a cancelled one stays, with its status."""

    id: str
    phone: str
    day: str
    time: str
    service: str
    name: str | None
    status: str = "booked"


class ClinicApi:
    """The clinic's diary and the requests it was sent, behind one lock."""

    def __init__(self, today: date | None = None, clock: Callable[[], datetime] | None = None) -> None:
        # A fixed `today` without a clock means "the start of that day": every slot is ahead.
        self.clock = clock or ((lambda: datetime.combine(today, time.min)) if today else datetime.now)
        self.lock = threading.Lock()
        self.reset()

    @property
    def today(self) -> date:
        """The clinic's today (the real one moves on past midnight)."""
        return self.clock().date()

    def reset(self) -> None:
        """Forget every booking, key and logged request, and seed the two other bookings."""
        with self.lock:
            self.appointments: dict[str, Appointment] = {}
            self.idempotent: dict[str, tuple[tuple[Any, ...], Result]] = {}
            self.requests: list[dict[str, Any]] = []
            self.next_id = 1
            day = self.today + timedelta(days=1)
            while day.weekday() >= 5:  # the next weekday, so both seeds are real slots
                day += timedelta(days=1)
            for at in ("09:00", "10:30"):
                self._add(SEED_PHONE, day.isoformat(), at, "checkup", "Rui Costa")

    def _add(self, phone: str, day: str, at: str, service: str, name: str | None) -> Appointment:
        appointment = Appointment(f"apt-{self.next_id}", phone, day, at, service, name)
        self.appointments[appointment.id] = appointment
        self.next_id += 1
        return appointment

    def _free(self, day: date) -> list[str]:
        if not self.today <= day <= self.today + timedelta(days=HORIZON_DAYS):
            return []
        now = self.clock()
        taken = {a.time for a in self.appointments.values() if a.day == day.isoformat() and a.status == "booked"}
        return [t for t in slot_times(day)
                if t not in taken and datetime.combine(day, time.fromisoformat(t)) > now]

    def free_slots(self, day_text: str | None, service: str | None) -> Result:
        """Answer list_free_slots."""
        day = _parse_day(day_text)
        if day is None:
            return _error(400, "day must be a date, YYYY-MM-DD")
        if service is not None and service not in SERVICES:
            return _error(400, f"service must be one of {', '.join(SERVICES)}")
        with self.lock:
            return 200, {"day": day.isoformat(), "slots": self._free(day)}

    def my_appointments(self, phone: str | None) -> Result:
        """Answer list_my_appointments: the phone's booked appointments from now on."""
        if not phone or not re.fullmatch(_PHONE, phone):
            return _error(400, "phone is required")
        now = self.clock()
        with self.lock:
            mine = [a for a in self.appointments.values() if a.phone == phone and a.status == "booked"
                    and datetime.fromisoformat(f"{a.day}T{a.time}") > now]
        return 200, {"appointments": [asdict(a) for a in sorted(mine, key=lambda a: (a.day, a.time))]}

    def book(self, body: Any, key: str | None) -> Result:
        """Answer book_appointment."""
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        phone, day_text, at = body.get("phone"), body.get("day"), body.get("time")
        service, name = body.get("service", "checkup"), body.get("name")
        if not isinstance(phone, str) or not re.fullmatch(_PHONE, phone):
            return _error(400, "phone is required, digits with an optional leading +")
        day = _parse_day(day_text)
        if day is None or not isinstance(at, str) or not _TIME.fullmatch(at):
            return _error(400, "day (YYYY-MM-DD) and time (HH:MM) are required")
        if service not in SERVICES or (name is not None and not isinstance(name, str)):
            return _error(400, f"service must be one of {', '.join(SERVICES)}; name a string")
        with self.lock:
            request = ("book", json.dumps(body, sort_keys=True))
            return self._once(key, request, lambda: self._book(phone, day, at, service, name))

    def _book(self, phone: str, day: date, at: str, service: str, name: str | None) -> Result:
        if at not in self._free(day):
            return _error(409, f"{day.isoformat()} {at} is not a free slot")
        return 201, asdict(self._add(phone, day.isoformat(), at, service, name))

    def cancel(self, appointment_id: str, phone: str | None, key: str | None) -> Result:
        """Answer cancel_appointment: only the owner's phone finds its appointment."""
        if not phone:
            return _error(400, "phone is required")
        with self.lock:
            return self._once(key, ("cancel", appointment_id, phone), lambda: self._cancel(appointment_id, phone))

    def _cancel(self, appointment_id: str, phone: str) -> Result:
        appointment = self.appointments.get(appointment_id)
        if appointment is None or appointment.phone != phone or appointment.status != "booked":
            return _error(404, "no such appointment of yours")
        appointment.status = "cancelled"
        return 200, asdict(appointment)

    def _once(self, key: str | None, request: tuple[Any, ...], run: Callable[[], Result]) -> Result:
        """Run a write once per Idempotency-Key: a repeat gets the first answer; the key on a
        different request is refused, as Stripe does (https://docs.stripe.com/api/idempotent_requests)."""
        if not key:
            return run()
        if key in self.idempotent:
            first, result = self.idempotent[key]
            return result if first == request else _error(422, "Idempotency-Key was used for another request")
        result = run()
        self.idempotent[key] = (request, result)
        return result

    def log(self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: Any) -> None:
        """Keep a request for /_standin/requests."""
        with self.lock:
            self.requests.append({"method": method, "path": path, "query": query, "headers": headers,
                                  "body": body})


def _parse_day(text: Any) -> date | None:
    try:
        return date.fromisoformat(text) if isinstance(text, str) and _DAY.fullmatch(text) else None
    except ValueError:  # 2025-02-30
        return None


def openapi(base_url: str, bearer: bool = False) -> dict[str, Any]:
    """Return the clinic's OpenAPI 3.1.0 document (https://spec.openapis.org/oas/v3.1.0);
    `x-bot-user: true` marks where the bot puts the user's own phone number."""
    def ref(name: str) -> dict[str, str]:
        return {"$ref": f"#/components/schemas/{name}"}

    def answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def param(name: str, where: str, schema: dict[str, Any], required: bool = True, **extra: Any) -> dict[str, Any]:
        return {"name": name, "in": where, "required": required, "schema": schema, **extra}

    day, text = {"type": "string", "format": "date"}, {"type": "string"}
    phone = {"type": "string", "pattern": _PHONE, "description": "The caller's phone number, as +351912345678"}
    caller = param("phone", "query", phone, **{"x-bot-user": True})
    key = {"$ref": "#/components/parameters/IdempotencyKey"}
    service = {"type": "string", "enum": SERVICES, "default": "checkup"}
    failed = {code: answer(reason, ref("Error")) for code, reason in [
        ("400", "Invalid input"), ("404", "Not found"), ("409", "Not a free slot"),
        ("422", "Idempotency-Key reused for another request")]}
    listing = {"type": "object", "required": ["appointments"],
               "properties": {"appointments": {"type": "array", "items": ref("Appointment")}}}
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Sorriso Dental Clinic", "version": "1.0.0",
                 "description": "Appointments at a small dental clinic. Open Mon-Fri 09:00-13:00 and "
                                "14:00-18:00, Sat 09:00-13:00; 30-minute slots."},
        "servers": [{"url": base_url}],
        "paths": {
            "/slots": {"get": {
                "operationId": "list_free_slots", "summary": "Free appointment slots on a day",
                "parameters": [param("day", "query", day), param("service", "query", service, required=False)],
                "responses": {"200": answer("The free slots", ref("Slots")), "400": failed["400"]}}},
            "/appointments": {
                "get": {"operationId": "list_my_appointments", "summary": "The caller's upcoming appointments",
                        "parameters": [caller], "responses": {
                            "200": answer("Booked appointments from now on", listing), "400": failed["400"]}},
                "post": {"operationId": "book_appointment", "summary": "Book an appointment", "parameters": [key],
                         "requestBody": {"required": True,
                                         "content": {"application/json": {"schema": ref("NewAppointment")}}},
                         "responses": {"201": answer("The booked appointment", ref("Appointment")),
                                       **{c: failed[c] for c in ("400", "409", "422")}}}},
            "/appointments/{appointment_id}": {"delete": {
                "operationId": "cancel_appointment", "summary": "Cancel an appointment",
                "parameters": [param("appointment_id", "path", text), caller, key],
                "responses": {"200": answer("The cancelled appointment", ref("Appointment")),
                              **{c: failed[c] for c in ("400", "404", "422")}}}},
        },
        "components": {
            "parameters": {"IdempotencyKey": param(
                "Idempotency-Key", "header", text, required=False,
                description="A repeat with the same key gets the first answer and changes nothing")},
            "schemas": {
                "Slot": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$", "examples": ["09:30"]},
                "Slots": {"type": "object", "required": ["day", "slots"],
                          "properties": {"day": day, "slots": {"type": "array", "items": ref("Slot")}}},
                "NewAppointment": {"type": "object", "required": ["phone", "day", "time"], "properties": {
                    "phone": {**phone, "x-bot-user": True}, "day": day, "time": ref("Slot"), "service": service,
                    "name": {"type": "string", "maxLength": 80}}},
                "Appointment": {"type": "object", "required": ["id", "phone", "day", "time", "service", "status"],
                                "properties": {"id": text, "phone": phone, "day": day, "time": ref("Slot"),
                                               "service": service, "name": {"type": ["string", "null"]},
                                               "status": {"type": "string", "enum": ["booked", "cancelled"]}}},
                "Error": {"type": "object", "required": ["error"], "properties": {"error": text}},
            },
        },
    }
    if bearer:  # every documented route needs it (https://spec.openapis.org/oas/v3.1.0#security-scheme-object)
        for operation in (op for path in doc["paths"].values() for op in path.values()):
            operation["responses"]["401"] = answer("Missing or wrong bearer token", ref("Error"))
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc


class ClinicServer(ThreadingHTTPServer):
    """The HTTP server, holding the clinic and its optional bearer token."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], clinic: ClinicApi, token: str | None) -> None:
        super().__init__(address, _Handler)
        self.clinic, self.token = clinic, token
        self.url = f"http://{self.server_address[0]}:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: ClinicServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = do_GET  # noqa: N815  # one router for all

    def _answer(self) -> None:
        method, url = self.command, urlsplit(self.path)
        path, query = url.path, dict(parse_qsl(url.query))
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null") if length >= 0 else ...
        except (ValueError, RecursionError):  # a bad length or not JSON: logged as null, a 400 where read
            body = ...
        clinic = self.server.clinic
        if path.startswith("/_standin/"):  # the inspection routes are not logged themselves
            return self._route_standin(method, path)
        clinic.log(method, path, query, dict(self.headers.items()), None if body is ... else body)
        if method == "GET" and path in ("/health", "/openapi.json", "/openapi.yaml"):
            return self._route_open(path)
        booking = re.fullmatch(r"/appointments/([^/]+)", path)
        if not (path in ("/slots", "/appointments") or booking):
            return self._json(*_error(404, f"no route {method} {path}"))
        if self.server.token and not hmac.compare_digest(
                self.headers.get("Authorization", "").encode(), f"Bearer {self.server.token}".encode()):
            return self._json(*_error(401, "a bearer token is required"), {"WWW-Authenticate": "Bearer"})
        key = self.headers.get("Idempotency-Key")
        if method == "GET" and path == "/slots":
            self._json(*clinic.free_slots(query.get("day"), query.get("service")))
        elif method == "GET" and path == "/appointments":
            self._json(*clinic.my_appointments(query.get("phone")))
        elif method == "POST" and path == "/appointments":
            self._json(*(_error(400, "the body is not JSON") if body is ... else clinic.book(body, key)))
        elif method == "DELETE" and booking:
            self._json(*clinic.cancel(unquote(booking.group(1)), query.get("phone"), key))
        else:
            self._json(*_error(404, f"no route {method} {path}"))

    def _route_open(self, path: str) -> None:
        if path == "/health":
            return self._json(200, {"status": "ok"})
        # The document names the server as the client reached it (localhost or 127.0.0.1).
        host = self.headers.get("Host")
        doc = openapi(f"http://{host}" if host else self.server.url, bearer=bool(self.server.token))
        if path == "/openapi.json":
            return self._json(200, doc)
        try:
            import yaml
        except ImportError:
            return self._json(*_error(404, "YAML needs PyYAML"))
        # application/yaml is YAML's registered media type (https://www.rfc-editor.org/rfc/rfc9512).
        self._send(200, "application/yaml", yaml.safe_dump(doc, sort_keys=False).encode())

    def _route_standin(self, method: str, path: str) -> None:
        clinic = self.server.clinic
        if method == "GET" and path == "/_standin/requests":
            with clinic.lock:
                self._json(200, {"requests": list(clinic.requests)})
        elif method == "POST" and path == "/_standin/reset":
            clinic.reset()
            self._json(200, {"status": "reset"})
        else:
            self._json(*_error(404, f"no route {method} {path}"))

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(body).encode(), headers)

    def _send(self, status: int, content_type: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": content_type, **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(host: str, port: int, token: str | None = None, today: date | None = None,
          clinic: ClinicApi | None = None) -> ClinicServer:
    """Start the clinic on a daemon thread and return its server (`.shutdown()` stops it)."""
    server = ClinicServer((host, port), clinic or ClinicApi(today), token)
    # A short poll, so shutdown() returns at once (each test stops its own server).
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="clinic-api",
                     daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    """Run the clinic until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(description="A stand-in dental clinic API on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN")
    args = parser.parse_args(argv)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    server = serve(args.host, args.port, args.token)
    print(f"clinic API on {server.url} (document at {server.url}/openapi.json)", flush=True)
    stopping.wait()
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
