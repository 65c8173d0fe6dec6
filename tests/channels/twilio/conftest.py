"""Fixtures of the Twilio channel's tests: the app with deferred replies on."""

from __future__ import annotations

import time
from xml.etree import ElementTree

import pytest

from bot import create_app
from bot.dev.twilio_standin import TwilioStandin
from tests.conftest import ACCOUNT, give_workers, sign


@pytest.fixture
def deferred_with(make_settings, redis_client, model, twilio: TwilioStandin, monkeypatch, run_worker):  # type: ignore[no-untyped-def]
    """deferred_with(**settings) -> post(form) -> (TwiML messages, seconds): the app with
    deferred replies on, its workers given the same settings (after run_worker has given
    them the defaults)."""

    def build(**overrides):  # type: ignore[no-untyped-def]
        settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                                 TWILIO_MESSAGING_BASE_URL=twilio.url, DEFERRED_REPLIES=True, **overrides)
        give_workers(settings, monkeypatch)
        client = create_app(settings).test_client()

        def post(form: dict[str, str]) -> tuple[list[str], float]:
            started = time.monotonic()
            response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
            elapsed = time.monotonic() - started
            assert response.status_code == 200, response.data
            return [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")], elapsed

        return post

    return build
