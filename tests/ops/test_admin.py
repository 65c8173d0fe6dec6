"""Operator and developer surface for memory: admin API, CLI, export, eval."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bot import create_app
from bot.storage.records import Fact
from bot.dev.standin import StandinModel
from bot.storage.keys import FACTS_PREFIX, user_key
from tests.cli_support import run_cli
from tests.conftest import redis_env, AUTH_TOKEN, USER, inbound_form, sign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOKEN = "admin-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def admin(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    return create_app(make_settings(ADMIN_TOKEN=TOKEN)).test_client()


def seed(redis_client, **facts: Fact) -> None:  # type: ignore[no-untyped-def]
    redis_client.hset(user_key(FACTS_PREFIX, USER), mapping={k: f.to_json() for k, f in facts.items()})


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", f"/admin/users/{USER}/facts"),
        ("put", f"/admin/users/{USER}/facts/name"),
        ("delete", f"/admin/users/{USER}/facts/name"),
        ("get", f"/admin/users/{USER}/memory/context?request=hi"),
        ("get", f"/admin/users/{USER}/memory/conflicts"),
        ("get", f"/admin/users/{USER}/entities"),
        ("post", f"/admin/users/{USER}/memory/select"),
        ("get", f"/admin/users/{USER}/export"),
        ("post", f"/admin/users/{USER}/erase"),
        ("put", "/admin/org/facts"),
    ],
)
def test_every_memory_route_needs_the_token(admin, method: str, path: str) -> None:  # type: ignore[no-untyped-def]
    assert getattr(admin, method)(path).status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * len(TOKEN)}
    assert getattr(admin, method)(path, headers=wrong).status_code == 401


def test_fact_crud(admin, redis_client) -> None:  # type: ignore[no-untyped-def]
    seed(redis_client, name=Fact(key="name", value="Anna", confidence=0.95, source="auto", category="identity"))
    put = admin.put(f"/admin/users/{USER}/facts/First Name", json={"value": "Ana", "category": "identity"}, headers=AUTH)
    assert put.status_code == 200 and put.json["key"] == "name" and put.json["source"] == "operator"
    assert put.json["previous"][0]["value"] == "Anna"
    listed = admin.get(f"/admin/users/{USER}/facts", headers=AUTH).json
    assert [f["value"] for f in listed["user"]] == ["Ana"]
    assert listed["stats"]["stored"] == 0  # the stats count extraction, not operators
    for bad in ({"value": "v", "importance": "high"}, {"value": "v", "importance": None}, {"value": "v", "importance": 2}):
        assert admin.put(f"/admin/users/{USER}/facts/x", json=bad, headers=AUTH).status_code == 400
    assert admin.put(f"/admin/users/{USER}/facts/x", json={"value": ""}, headers=AUTH).status_code == 400
    assert admin.put(f"/admin/users/{USER}/facts/x", json={"value": "v", "category": "nope"}, headers=AUTH).status_code == 400
    assert admin.put(f"/admin/users/{USER}/facts/x", data="not json", headers=AUTH).status_code == 400
    # no category: the one the key implies, as an extracted fact would be filed
    for key, category in (("Full Name", "identity"), ("home city", "location"), ("food allergy", "health"),
                          ("shoe size", "other")):
        put = admin.put(f"/admin/users/{USER}/facts/{key}", json={"value": "v"}, headers=AUTH)
        assert put.status_code == 200 and put.json["category"] == category
    assert admin.delete(f"/admin/users/{USER}/facts/name", headers=AUTH).status_code == 200
    assert admin.delete(f"/admin/users/{USER}/facts/name", headers=AUTH).status_code == 404


def test_memory_context_conflicts_and_select(admin, redis_client) -> None:  # type: ignore[no-untyped-def]
    seed(
        redis_client,
        city=Fact(key="city", value="Lisbon", confidence=0.9, category="location",
                  conflict={"value": "Porto", "confidence": 0.85}),
        diet=Fact(key="diet", value="vegetarian", confidence=0.9, category="diet"),
        shoe_size=Fact(key="shoe_size", value="42", confidence=0.5),
    )
    context = admin.get(f"/admin/users/{USER}/memory/context?request=where can I eat", headers=AUTH).json
    assert context["block"].startswith("PERSISTENT MEMORY (READ-ONLY)")
    assert {s["key"] for s in context["selected"]} == {"city", "diet"}
    assert {"key": "shoe_size", "reason": "low_confidence"} in context["dropped"]
    conflicts = admin.get(f"/admin/users/{USER}/memory/conflicts", headers=AUTH).json["conflicts"]
    assert [(c["key"], c["conflict"]["value"]) for c in conflicts] == [("city", "Porto")]
    selected = admin.post(f"/admin/users/{USER}/memory/select", json={"request": "recipe ideas", "max_tokens": 100}, headers=AUTH)
    assert selected.status_code == 200 and selected.json["tokens"] <= 100
    assert admin.post(f"/admin/users/{USER}/memory/select", json={"max_tokens": 5}, headers=AUTH).status_code == 400


def test_export_and_erase(admin, send, redis_client) -> None:  # type: ignore[no-untyped-def]
    send("Where should I stay in Lisbon for a week in May?")
    seed(redis_client, name=Fact(key="name", value="Ana", confidence=0.9))
    exported = admin.get(f"/admin/users/{USER}/export", headers=AUTH).json
    pairs = exported["conversation"]["pairs"]
    assert len(pairs) == 1 and pairs[0]["user"].startswith("Where should I stay")  # listed once
    assert pairs[0]["in_recent_window"] and not pairs[0]["summarized"]
    assert exported["facts"]["user"][0]["value"] == "Ana" and exported["keys"]
    erased = admin.post(f"/admin/users/{USER}/erase", headers=AUTH).json
    assert erased["keys_deleted"] >= 3
    assert list(redis_client.scan_iter(match="*14155550100*")) == []


def test_org_facts_and_opt_out_settings(admin, redis_client) -> None:  # type: ignore[no-untyped-def]
    assert admin.put("/admin/org/facts", json={"business_hours": "9-18"}, headers=AUTH).json == {"stored": ["business_hours"]}
    assert [f["value"] for f in admin.get("/admin/org/facts", headers=AUTH).json["facts"]] == ["9-18"]
    assert admin.put("/admin/org/facts", json=["x"], headers=AUTH).status_code == 400
    assert admin.put("/admin/org/facts", json={"k": {"value": "v", "importance": "hi"}}, headers=AUTH).status_code == 400
    assert admin.delete("/admin/org/facts/Business Hours", headers=AUTH).status_code == 200  # normalized
    response = admin.put(f"/admin/users/{USER}/memory/settings", json={"opted_out": True}, headers=AUTH)
    assert response.json == {"user": USER, "opted_out": True}
    assert admin.get(f"/admin/users/{USER}/facts", headers=AUTH).json["opted_out"] is True


# -- CLI -----------------------------------------------------------------------------------
@pytest.fixture
def cli(redis_url: str, queue_redis_url: str, standin_server: StandinModel, redis_client, model, tmp_path):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TWILIO_", "REDIS_", "QUEUE_"))}
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, OPENAI_API_KEY="k", OPENAI_BASE_URL=standin_server.url,
               **redis_env(redis_url, queue_redis_url))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env, tmp_path)

    return run


def test_cli_facts_extract_inspect_erase(cli, send, model: StandinModel, redis_client) -> None:  # type: ignore[no-untyped-def]
    assert cli("facts", USER, "set", "home city", "Lisbon", "--category", "location").returncode == 0
    listed = json.loads(cli("facts", USER, "--json").stdout)
    assert [(f["key"], f["value"], f["source"]) for f in listed["user"]] == [("city", "Lisbon", "operator")]
    send("I'm Ana and I work as a nurse at the central hospital.")
    model.script({"content": json.dumps({"facts": [{"key": "occupation", "value": "nurse", "category": "work",
                                                     "confidence": 0.9, "importance": 0.6, "scope": "user",
                                                     "explicit": False}]}), "match": "Known facts:"})
    result = cli("extract", USER)
    assert result.returncode == 0 and "'stored': 1" in result.stdout
    report = json.loads(cli("inspect", USER, "--json").stdout)
    assert {f["key"] for f in report["facts"]["user"]} == {"city", "occupation"}
    assert cli("facts", USER, "delete", "city").returncode == 0
    assert cli("erase", USER).returncode == 1  # needs --yes
    assert cli("erase", USER, "--yes").returncode == 0
    assert list(redis_client.scan_iter(match="*14155550100*")) == []


def test_cli_eval_runs_against_the_standin_and_says_so(cli, standin_server: StandinModel) -> None:  # type: ignore[no-untyped-def]
    """In CI the stand-in's regular expressions answer: the report must not pass for a model's."""
    result = cli("eval", "--limit", "6", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["conversations"] == 6 and report["facts_stored"] > 0
    assert report["answered_by"] == "stand-in" and report["endpoint"].startswith(standin_server.url)
    text = cli("eval", "--limit", "2")
    assert "recall" in text.stdout and "precision" in text.stdout
    assert "the STAND-IN at http://127.0.0.1" in text.stdout and "gpt-4o-mini" not in text.stdout


def test_bundled_eval_set_is_big_and_varied() -> None:
    from bot.dev.evaluation import load_cases

    cases = load_cases()
    kinds = {c.kind for c in cases}
    assert len(cases) >= 30
    assert {"name", "place", "preference", "update", "negation", "joke"} <= kinds


def test_a_restart_keeps_what_operators_changed_in_org_facts(make_settings, redis_client, model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    org = tmp_path / "org.json"
    org.write_text(json.dumps({"business_hours": "Mon-Fri 9-18", "returns": "30 days", "phone": "555"}))
    settings = make_settings(ADMIN_TOKEN=TOKEN, ORG_FACTS_FILE=str(org))
    admin = create_app(settings).test_client()
    admin.put("/admin/org/facts", json={"business_hours": "Mon-Sat 9-20", "parking": "free"}, headers=AUTH)
    org.write_text(json.dumps({"business_hours": "Mon-Fri 9-18", "returns": "60 days"}))  # phone dropped
    admin = create_app(settings).test_client()  # a process starts: the file is read again
    facts = {f["key"]: f["value"] for f in admin.get("/admin/org/facts", headers=AUTH).json["facts"]}
    assert facts == {"business_hours": "Mon-Sat 9-20", "parking": "free", "returns": "60 days"}
