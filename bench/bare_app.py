"""A bare Flask app for bench/bench_paced.py --bare: /whatsapp answers a fixed TwiML reply,
/readyz answers ok, nothing else. What the web process costs with no bot in it, under the
Procfile's own gunicorn line."""

from __future__ import annotations

from flask import Flask, Response

app = Flask(__name__)
REPLY = '<?xml version="1.0" encoding="UTF-8"?><Response><Message>ok</Message></Response>'


@app.post("/whatsapp")
def whatsapp() -> Response:
    return Response(REPLY, mimetype="text/xml")


@app.get("/readyz")
def readyz() -> Response:
    return Response("ok", mimetype="text/plain")
