"""The handover from the operator surfaces: `whatsapp-bot handover`, the admin API, and what
inspect shows."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from bot import create_app
from bot.ops.commands import build_parser
from bot.storage.keys import HANDOVER_PREFIX, user_key
from tests.conftest import USER, inbound_form, sign

pytestmark = pytest.mark.integration

TOKEN = "admin-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOTICE = "A person from our team will answer you here."


def cli(services, *argv: str) -> int:  # type: ignore[no-untyped-def]
    args = build_parser().parse_args(list(argv))
    return int(args.func(services, args))


def test_the_cli_turns_a_handover_on_shows_it_and_hands_back(services, send, model, capsys) -> None:  # type: ignore[no-untyped-def]
    with capture_logs() as logs:
        assert cli(services, "handover", USER, "on") == 0
    assert "handover on" in capsys.readouterr().out and services.handover.get(USER).by == "cli"
    assert [e["actor"] for e in logs if e["event"] == "audit.handover_taken"] == ["cli"]
    assert NOTICE in send("I need a person please").get_data(as_text=True)
    assert cli(services, "handover", USER) == 0  # status, the default
    out = capsys.readouterr().out
    assert "handed over to cli" in out and "user: I need a person please" in out
    assert cli(services, "handover", USER, "status", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["handover"]["by"] == "cli" and report["handover_log"][0]["text"] == "I need a person please"
    assert cli(services, "inspect", USER) == 0
    out = capsys.readouterr().out
    assert "handover: ON, by cli" in out and "handover log (1" in out
    assert cli(services, "handover", USER, "off") == 0
    assert "1 pair(s)" in capsys.readouterr().out
    assert services.handover.get(USER) is None and model.requests() == []
    assert cli(services, "handover", USER, "status") == 0
    assert "no handover" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        build_parser().parse_args(["handover", "14155550100", "on"])  # not +E164


@pytest.fixture
def admin(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    return create_app(make_settings(ADMIN_TOKEN=TOKEN)).test_client()


def test_the_admin_api_takes_over_and_hands_back(admin, redis_client, model) -> None:  # type: ignore[no-untyped-def]
    path = f"/admin/users/{USER}/handover"
    assert admin.put(path, json={"active": True}).status_code == 401
    assert admin.get(path).status_code == 401
    assert admin.put(path, json={"active": "yes"}, headers=AUTH).status_code == 400
    assert admin.put("/admin/users/14155550100/handover", json={"active": True}, headers=AUTH).status_code == 400
    assert not redis_client.exists(user_key(HANDOVER_PREFIX, USER))
    with capture_logs() as logs:
        taken = admin.put(path, json={"active": True}, headers=AUTH)
    assert taken.status_code == 200 and taken.json["active"] is True and taken.json["handover"]["by"] == "admin_api"
    [audit] = [e for e in logs if e["event"] == "audit.handover_taken"]
    assert audit["actor"] == "admin_api" and audit["via"] == "admin_api" and USER not in json.dumps(audit)
    form = inbound_form("Is my visa appointment confirmed?")
    admin.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    state = admin.get(path, headers=AUTH).json
    assert state["active"] is True and [e["text"] for e in state["handover_log"]] == ["Is my visa appointment confirmed?"]
    returned = admin.put(path, json={"active": False}, headers=AUTH)
    assert returned.json == {"user": USER, "active": False, "pairs_stored": 1}
    assert admin.get(path, headers=AUTH).json["active"] is False and model.requests() == []
    exported = admin.get(f"/admin/users/{USER}/export", headers=AUTH).json
    assert exported["handover"] is None and exported["handover_log"] == []
    assert exported["conversation"]["pairs"][0]["user"] == "Is my visa appointment confirmed?"
