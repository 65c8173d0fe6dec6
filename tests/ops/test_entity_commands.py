"""The entity surfaces: `entities`, `entities reextract`, `recall`, `eval entities`, and the
admin API's entities and explained memory selection."""

from __future__ import annotations

import json

import pytest

from bot.dev.standin import StandinModel
from bot.memory.entities import Mention, absorb
from bot.storage.entities import EntityState, fact_hash
from bot.storage.records import Fact
from tests.conftest import USER
from tests.ops.test_admin import AUTH, admin, cli, seed  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration

FACTS = {
    "dog_name": Fact(key="dog_name", value="Rex, a beagle", confidence=0.9, category="family", importance=0.4),
    "dog_vet": Fact(key="dog_vet", value="Rex goes to VetPlus", confidence=0.9, category="other", importance=0.4),
    "allergies": Fact(key="allergies", value="peanuts", confidence=0.9, category="health", importance=0.9),
}


def store_entities(services, version: str) -> None:  # type: ignore[no-untyped-def]
    token = services.store.take_trigger(USER, "entities")
    mentions = [Mention("Rex", "PET", ("dog_name", "dog_vet")), Mention("VetPlus", "ORG", ("dog_vet",))]
    entities, _ = absorb({}, mentions, [], similarity=0.9, min_confidence=0.6, max_entities=200)
    read = {fact_hash(f) for f in FACTS.values()}
    assert services.entities.update(USER, token, lambda _old: EntityState(entities, read, version)) is not None


def test_entities_recall_and_the_admin_api_explain_each_pick(cli, admin, services, redis_client) -> None:  # type: ignore[no-untyped-def]
    seed(redis_client, **FACTS)
    store_entities(services, services.prompts.entities.version)
    listed = json.loads(cli("entities", USER, "--json").stdout)
    assert [e["key"] for e in listed["entities"]] == ["PET:rex", "ORG:vetplus"]
    assert listed["entities"][0]["related"] == {"ORG:vetplus": 0.75}
    text = cli("recall", USER, "Is it ok to give Rexy chocolate?").stdout
    assert "Rex (PET) by fuzzy 0.86, from 'Rexy'" in text and "[entity Rex, fuzzy 0.86]" in text
    assert "dog_vet = Rex goes to VetPlus" in text
    api = admin.get(f"/admin/users/{USER}/entities", headers=AUTH)
    assert api.status_code == 200 and {e["name"] for e in api.json["entities"]} == {"Rex", "VetPlus"}
    picked = admin.post(f"/admin/users/{USER}/memory/select", json={"request": "how is rex?"}, headers=AUTH).json
    assert picked["entities"][0]["why"] == "entity Rex, normalized"
    assert {s["key"]: s["why"] for s in picked["selected"]} == {
        "dog_name": "entity Rex, normalized", "dog_vet": "entity Rex, normalized", "allergies": "always"}
    context = admin.get(f"/admin/users/{USER}/memory/context?request=VetPlus opening hours", headers=AUTH).json
    whys = {s["key"]: s["why"] for s in context["selected"]}
    assert whys["dog_vet"] == "entity VetPlus, exact" and whys["dog_name"] == "related to VetPlus"
    assert cli("entities", "+1", "--json").returncode == 2


@pytest.mark.cluster
def test_reextract_rebuilds_from_facts_resumes_and_needs_a_target(cli, services, redis_client, model: StandinModel) -> None:  # type: ignore[no-untyped-def]
    seed(redis_client, **FACTS)
    store_entities(services, "0")  # read by an older prompt: every fact is to be read again
    assert cli("entities", "reextract").returncode == 2
    model.reset()
    done = cli("entities", "reextract", "--all", "--per-minute", "6000", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["users"], report["rebuilt"], report["model_calls"]) == (1, 1, 1)
    assert "1/1 users" in done.stderr and "extract_entities@" in done.stderr
    [request] = model.requests()
    assert "[dog_name]" in request["messages"][-1]["content"]  # facts, never the conversation
    state = services.entities.load(USER)
    assert "PET:rex" in state.entities  # the stand-in found it again from the facts
    assert state.prompt_version == services.prompts.entities.version and len(state.read) == 3
    again = json.loads(cli("entities", "reextract", USER, "--json").stdout)
    assert (again["up_to_date"], again["model_calls"]) == (1, 0)  # resumed: nothing left to read


def test_eval_entities_reports_the_deterministic_figures_and_the_model_part(cli, standin_server: StandinModel) -> None:  # type: ignore[no-untyped-def]
    result = cli("eval", "entities", "--limit", "8", "--json")
    report = json.loads(result.stdout)
    for name in ("match_recall", "retrieval_coverage", "irrelevant_share", "duplicate_rate"):
        assert 0 <= report[name] <= 1
    assert isinstance(report["near_miss_false_matches"], int)
    assert result.returncode == (0 if all(report["targets_met"].values()) else 1)
    model = report["model_part"]
    assert model["answered_by"] == "stand-in" and model["named"] > 0  # plumbing only, in CI
    check = report["task_check"]  # every message through the task call, answered and parsed
    assert check["answered_by"] == "stand-in" and check["task_failed"] == 0 and 0 <= check["match_recall"] <= 1
    text = cli("eval", "entities", "--no-model", "--limit", "3").stdout
    assert "match recall" in text and "pass 2" not in text
