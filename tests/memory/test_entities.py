"""Entities (docs/entities.md): names, consolidation, message-time matching and the store."""

from __future__ import annotations

import json

import pytest

from bot.memory.entities import Mention, absorb, is_specific
from bot.memory.entity_extraction import mentions_from, parse_entities, render_entity_request
from bot.memory.matching import EntityIndex, EntityMatcher, IndexCache
from bot.memory.names import comparable, entity_key, normalize_name, word_grams
from bot.memory.selection import select_memory
from bot.storage.entities import Entity, EntityState, EntityStore, decode_state, encode_state, fact_hash
from bot.storage.records import Fact
from bot.llm.tokens import TokenCounter
from tests.conftest import USER

RULES = {"similarity": 0.9, "min_confidence": 0.6, "max_entities": 200}


def entity(name: str, type_: str = "PERSON", aliases: tuple[str, ...] = (), facts: tuple[str, ...] = ("f",)) -> Entity:
    return Entity(entity_key(type_, name), name, type_, list(aliases), 0.9, list(facts))


# -- names -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "normal"),
    [("São Paulo", "sao paulo"), ("O'Brien's Pub", "o brien s pub"), ("  REX ", "rex"), ("Dr. Lee", "dr lee"),
     ("Zoë-Ann", "zoe ann"), ("iPhone 15 Pro", "iphone 15 pro"), ("Małgorzata", "malgorzata"),
     ("Kadıköy", "kadikoy"), ("Đà Nẵng", "da nang"), ("Bjørn Ærø", "bjorn aero")],
)
def test_normalize_name(name: str, normal: str) -> None:
    assert normalize_name(name) == normal


def test_word_runs_drop_possessives_and_keep_positions() -> None:
    grams = word_grams("How is Ana's dog?", 2)
    assert [g.norm for g in grams if g.size == 1] == ["how", "is", "ana", "dog"]
    assert comparable("Ana's") == "ana"


@pytest.mark.parametrize("name", ["the doctor", "my boss", "2024-05-01", "Monday", "tomorrow", "12", "a"])
def test_generic_names_are_not_entities(name: str) -> None:
    assert not is_specific(name)


# -- consolidation ---------------------------------------------------------------------------
def test_one_thing_mentioned_many_ways_stays_one_entity() -> None:
    mentions = [
        Mention("Catarina Sousa", "PERSON", ("sister",)),
        Mention("catarina sousa", "PERSON", ("sister_job",)),
        Mention("Catarina Souza", "PERSON", ("sister_city",)),  # a typo: fuzzy >= 0.9
        Mention("Catarina", "PERSON", ("birthday",)),  # the first name alone
        Mention("São Paulo", "PLACE", ("sister_city",)),
        Mention("Sao Paulo", "PLACE", ("trip",)),
    ]
    out, stats = absorb({}, mentions, [], **RULES)
    assert set(out) == {"PERSON:catarina sousa", "PLACE:sao paulo"}
    person = out["PERSON:catarina sousa"]
    assert person.facts == ["sister", "sister_job", "sister_city", "birthday"]
    assert "Catarina Souza" in person.aliases and "Catarina" in person.aliases
    assert stats.added == 2 and stats.merged == 4


@pytest.mark.parametrize(
    ("short", "full", "type_"),
    [("DPMB", "Dopravní podnik města Brna", "ORG"), ("UEM", "Universidade Eduardo Mondlane", "ORG"),
     ("Reverdin", "Maison Reverdin", "ORG"), ("Dr Matusse", "Fernando Matusse", "PERSON")],
)
def test_initials_last_names_and_titles_join_the_full_name(short: str, full: str, type_: str) -> None:
    for first, second in ((short, full), (full, short)):  # whichever comes first
        out, _ = absorb({}, [Mention(first, type_, ("a",))], [], **RULES)
        out, _ = absorb(out, [Mention(second, type_, ("b",))], [], **RULES)
        [only] = out.values()
        assert only.name == full and only.facts == ["a", "b"]


def test_a_fuller_name_becomes_canonical() -> None:
    out, _ = absorb({}, [Mention("Matt", "PERSON", ("boss",))], [], **RULES)
    out, _ = absorb(out, [Mention("Matt Joyce", "PERSON", ("boss_email",))], [], **RULES)
    assert list(out) == ["PERSON:matt joyce"] and out["PERSON:matt joyce"].aliases == ["Matt"]


def test_same_name_other_type_is_another_entity_and_near_names_stay_apart() -> None:
    mentions = [Mention("Jordan", "PERSON", ("friend",)), Mention("Jordan", "PLACE", ("trip",)),
                Mention("Maria", "PERSON", ("sister",)), Mention("Mario", "PERSON", ("colleague",))]
    out, _ = absorb({}, mentions, [], **RULES)
    assert set(out) == {"PERSON:jordan", "PLACE:jordan", "PERSON:maria", "PERSON:mario"}


def test_rereading_a_fact_drops_its_edges_and_orphans_go() -> None:
    out, _ = absorb({}, [Mention("Rex", "PET", ("dog", "vet")), Mention("VetPlus", "ORG", ("vet",))], [], **RULES)
    assert out["PET:rex"].related == {"ORG:vetplus": 0.75}
    out, stats = absorb(out, [], ["vet"], **RULES)  # the fact was deleted
    assert set(out) == {"PET:rex"} and out["PET:rex"].facts == ["dog"] and out["PET:rex"].related == {}
    assert stats.removed == 1


def test_generic_unsure_and_unknown_type_mentions_are_rejected() -> None:
    mentions = [Mention("the vet", "PERSON", ("a",)), Mention("Rex", "PET", ("a",), confidence=0.3),
                Mention("Rex", "DOG", ("a",))]
    out, stats = absorb({}, mentions, [], **RULES)
    assert out == {} and stats.rejected == 3


def test_the_cap_keeps_the_most_mentioned() -> None:
    mentions = [Mention(f"Person{i}", "PERSON", tuple(f"f{j}" for j in range(i % 3 + 1))) for i in range(10)]
    out, _ = absorb({}, mentions, [], **{**RULES, "max_entities": 4})
    assert sorted(len(e.facts) for e in out.values()) == [2, 3, 3, 3]


# -- pass 2's request and answer -------------------------------------------------------------
def test_the_answer_is_parsed_leniently_and_tied_to_facts() -> None:
    item = {"name": "Rex", "type": "PET", "aliases": [], "facts": [], "confidence": 0.9, "evidence": "",
            "normalization_notes": ""}
    items, bad = parse_entities("Sure: ```json\n" + json.dumps({"entities": [item, {"name": "x"}]}) + "\n```")
    assert [i.name for i in items] == ["Rex"] and bad == 1
    facts = [Fact("dog_name", "Rex, a beagle"), Fact("city", "Porto")]
    [mention] = mentions_from(items, facts)  # no fact keys given: tied by the name in the value
    assert mention.facts == ("dog_name",)
    request = render_entity_request([entity("Ana Silva", aliases=("Ana",))], facts)
    assert "- Ana Silva (PERSON), also: Ana" in request and '- [dog_name] "Rex, a beagle"' in request


# -- matching --------------------------------------------------------------------------------
INDEX = EntityIndex([
    entity("Rex", "PET"), entity("Ana Silva", aliases=("Ana",)), entity("Lisbon", "PLACE", ("Lisboa",)),
    entity("Kindle", "PRODUCT"), entity("Apple", "ORG"), entity("Maria"), entity("Catarina"),
    entity("Kevin"), entity("Dakar", "PLACE"), entity("Alexandria", "PLACE"), entity("Isla"), entity("Lukas"),
    entity("Hamburg", "PLACE"), entity("Hamburg Marathon", "EVENT"), entity("Candace Silva"), entity("Thelma"),
    entity("Lolo", "PET"), entity("Porto", "PLACE"), entity("Fitness Hut", "ORG"), entity("Fernando Matusse"),
    entity("Valencia", "PLACE"), entity("Boston", "PLACE"), entity("Maxime"), entity("Pickle", "PET"),
    entity("Jean-Paul Martin"), entity("Kuala Lumpur", "PLACE"), entity("Old Town Kitchen", "ORG"),
    entity("Abeokuta", "PLACE"), entity("Funke"), entity("Toyota Camry", "PRODUCT"),
    entity("Jarmark św. Dominika", "EVENT"), entity("Hazel Wong"), entity("Penny Robinson"), entity("Klaus Wolf"),
    entity("St. Louis", "PLACE"), entity("Rock'n'Roll Hall", "ORG"), entity("Sant'Anna d'Alessandria", "PLACE"),
    entity("Ruben"), entity("Alice Cooper"), entity("Lisa Marie King"),
])


@pytest.mark.parametrize(
    ("message", "key", "strategy"),
    [
        ("How is Rex today?", "PET:rex", "exact"),
        ("how is rex today?", "PET:rex", "normalized"),
        ("Did you see Ana's message?", "PERSON:ana silva", "exact"),
        ("Vou a LISBOA amanhã", "PLACE:lisbon", "normalized"),
        ("both my kindles broke", "PRODUCT:kindle", "normalized"),
        ("Is it ok to give Rexy chocolate?", "PET:rex", "fuzzy"),
        ("flights to Lisbn please", "PLACE:lisbon", "fuzzy"),
        ("did Catarna call?", "PERSON:catarina", "fuzzy"),
        ("Apple stock is up", "ORG:apple", "exact"),
        ("Kev skipped practice again", "PERSON:kevin", "nickname"),
        ("Luki is sad about the distance", "PERSON:lukas", "nickname"),
        ("Gift ideas for Catarna? She turns ten", "PERSON:catarina", "fuzzy"),  # the next sentence is not her surname
        ("Training plan for the Hamburg Marathon please", "EVENT:hamburg marathon", "exact"),
        ("¿Qué le puedo regalar a Maria?", "PERSON:maria", "exact"),
        ("Paolo and I go to Dakar for Christmas", "PLACE:dakar", "exact"),
        ("is rex ok to eat grapes?", "PET:rex", "normalized"),  # a writer who never capitalises
        ("I go to fitness hut today", "ORG:fitness hut", "normalized"),  # two words: no ordinary word
        ("staying at Ana's Porto flat", "PLACE:porto", "exact"),  # a possessive ends a name
        ("staying at Ana's Porto flat", "PERSON:ana silva", "exact"),
        ("can Dr Matuse sign my form?", "PERSON:fernando matusse", "fuzzy"),  # a last name, misspelt
        ("Is Valencia nice in May?", "PLACE:valencia", "exact"),
        ("Valencia oranges shops open on Sunday?", "PLACE:valencia", "exact"),  # oranges shops: the city's
        ("Best Boston coffee shops?", "PLACE:boston", "exact"),  # a place to drink it, in Boston
        ("My sister and Max are coming over", "PERSON:maxime", "nickname"),  # capitalised mid-sentence: a name
        ("Pickle ate my sock", "PET:pickle", "exact"),
        ("JP forgot our anniversary again", "PERSON:jean paul martin", "initials"),  # Jean-Paul
        ("JPM forgot our anniversary again", "PERSON:jean paul martin", "initials"),
        ("Cheapest way to ship a box to KL?", "PLACE:kuala lumpur", "initials"),
        ("Is OTK open tonight?", "ORG:old town kitchen", "initials"),
        ("Should we drive to Abeokuta for Funke's wedding?", "PLACE:abeokuta", "exact"),  # two known
        ("Should we drive to Abeokuta for Funke's wedding?", "PERSON:funke", "exact"),  # names, joined
        ("What should I sell at Jarmark św. Dominika?", "EVENT:jarmark sw dominika", "normalized"),
        ("Will Prof. Matusse be in?", "PERSON:fernando matusse", "exact"),  # a title's full stop
        ("Can Sra. Silva call me?", "PERSON:ana silva", "exact"),  # ends no sentence
        ("Flights to St. Louis in May?", "PLACE:st louis", "normalized"),  # nor one inside a known name
        ("Can Hazel pick me up?", "PERSON:hazel wong", "exact"),  # first and last names that are
        ("Penny said hi", "PERSON:penny robinson", "exact"),  # also words stay names
        ("Ask Wolf about it", "PERSON:klaus wolf", "exact"),
        ("Does Ana teach on Mondays?", "PERSON:ana silva", "exact"),  # "teach" is not tea
        ("Is the Porto team playing tonight?", "PLACE:porto", "exact"),  # nor "team"
        ("at the Rock'n Roll Hall tonight", "ORG:rock n roll hall", "normalized"),  # words split at '
        ("Sant Anna d'Alessandria soon", "PLACE:sant anna d alessandria", "normalized"),
    ],
)
def test_levels(message: str, key: str, strategy: str) -> None:
    found = {m.key: m for m in INDEX.match(message, 0.85)}
    assert key in found and found[key].strategy == strategy


@pytest.mark.parametrize(
    "message",
    ["an apple a day", "Mario is coming", "I love Portugal", "Rey Mysterio won", "nothing here at all",
     "My friend Lucas", "How do I cook lima beans?", "Is the Dakar Rally still held in Saudi Arabia?",
     "My neighbour's daughter Alexandra is getting married", "Is an Islay single malt a good gift?",
     "Does the Instituto Catarina run classes?", "Can you call me later", "The weather is nice", "lol ok",
     "Is rex ok to eat grapes?",  # the writer capitalises: lower-case "rex" is a word, not the dog
     # A name before goods named after it is the kind of thing: a cultivar, a dish, a breed
     "Are Valencia oranges better for juice than navel oranges?", "Is a Boston terrier good with kids?",
     "Boston cream pie recipe", "Max 3 pages?",  # a common word first in the sentence is the word
     "is it safe to pickle cucumbers?",  # a pet name that is an everyday word, in lower case
     "SHIP IT TO KL ASAP", "Kl is short for kilolitre", "OK see you",  # shouted, not capitals only
     "the AC is broken again", "LMK when you land",  # chat abbreviations are not initials
     "Tickets for Waiting for Funke", "Is a Camry cruise worth it?",  # a model alone: too many are words
     "watching HBO Max tonight", "I'm learning Ruby"],  # a longer name; a word with an ending is no short form
)
def test_near_misses_do_not_match(message: str) -> None:
    assert INDEX.match(message, 0.85) == []


def test_an_abbreviation_ends_a_sentence_unless_a_known_name_has_it() -> None:
    message = "We moved to Baker St. Rex loves it."
    assert [m.key for m in EntityIndex([entity("Rex", "PET")]).match(message, 0.85)] == ["PET:rex"]
    # A user who has St. Louis: "St. Rex" reads as one name, as "St. Louis" must (the trade-off)
    assert EntityIndex([entity("Rex", "PET"), entity("St. Louis", "PLACE")]).match(message, 0.85) == []


def test_leaving_out_runs_that_start_no_name_changes_no_match() -> None:
    from bot.memory.names import word_grams

    messages = ["at the Rock'n Roll Hall tonight", "Sant Anna d'Alessandria soon", "D'Angelo O Brien called",
                "Training plan for the Hamburg Marathon please", "Vou a LISBOA amanhã"]
    for message in messages:
        every = [g for g in word_grams(message, INDEX.max_words) if g.size == 1 or g.norm in INDEX.normal]
        kept = word_grams(message, INDEX.max_words, None, INDEX.starts)
        assert set(every) <= set(kept)  # every run a name could be, exactly or normalized, is kept


def test_a_name_inside_a_longer_one_is_not_matched_twice() -> None:
    found = [m.key for m in INDEX.match("Training plan for the Hamburg Marathon please", 0.85)]
    assert found == ["EVENT:hamburg marathon"]


def test_fuzzy_scores_are_reported_and_explained() -> None:
    [match] = [m for m in INDEX.match("Is it ok to give Rexy chocolate?", 0.85) if m.key == "PET:rex"]
    assert 0.85 <= match.score < 1 and match.explain().startswith("entity Rex, fuzzy 0.8")


def test_retrieval_puts_matched_then_related_facts_first() -> None:
    facts = {k: Fact(k, v, c, 0.9, imp) for k, v, c, imp in [
        ("dog", "Rex, a beagle", "family", 0.3), ("vet", "VetPlus on Fridays", "other", 0.3),
        ("allergies", "peanuts", "health", 0.9), ("hobby", "chess", "preference", 0.99)]}
    rex = Entity("PET:rex", "Rex", "PET", [], 0.9, ["dog"], {"ORG:vetplus": 0.75})
    vet = Entity("ORG:vetplus", "VetPlus", "ORG", [], 0.9, ["vet"], {"PET:rex": 0.75})
    matches = EntityIndex([rex, vet]).match("how is rex", 0.85)
    picked = select_memory({"user": facts}, "how is rex", TokenCounter("gpt-4o-mini"), threshold=0.7,
                           conflict_margin=0.1, max_tokens=200, matches=matches,
                           entities={rex.key: rex, vet.key: vet})
    assert [(s.fact.key, s.why) for s in picked.selected][:3] == [
        ("dog", "entity Rex, normalized"), ("vet", "related to Rex"), ("allergies", "always")]


# -- the store -------------------------------------------------------------------------------
def test_state_round_trips_compactly_and_knows_what_to_read() -> None:
    facts = {"dog": Fact("dog", "Rex"), "city": Fact("city", "Porto")}
    rex = entity("Rex|x;y", "PET", aliases=("Rexy",), facts=("dog", "vet"))  # separators in a name are made safe
    vet = entity("VetPlus", "ORG", facts=("vet",))
    state = EntityState({rex.key: rex, vet.key: vet}, {fact_hash(facts["dog"])}, "1")
    stored = encode_state(state)
    assert stored.splitlines()[1] == "pt|Rex/x,y|9|dog,vet|Rexy" and len(stored) < 70
    again = decode_state(stored, entity_key)
    assert again.entities[rex.key].facts == ["dog", "vet"] and again.read == state.read
    assert again.entities[rex.key].related == {vet.key: 0.75}  # RELATED is derived from MENTIONS
    assert again.unread(facts, "1") == (["city"], ["vet"])  # new; and a fact an entity names is gone
    assert again.unread(facts, "2")[0] == ["dog", "city"]  # a new prompt version reads all again
    assert decode_state("garbage\npt|Rex", entity_key).entities == {}  # another format: read again


def test_only_the_trigger_holder_writes_and_the_matcher_sees_new_versions(redis_client, services) -> None:  # type: ignore[no-untyped-def]
    store: EntityStore = services.entities
    matcher = EntityMatcher(store, 0.85, IndexCache())
    assert matcher.recall(USER, "how is Rex").matches == []
    token = services.store.take_trigger(USER, "entities")
    assert store.update(USER, "not-the-token", lambda s: s) is None
    store.update(USER, token, lambda s: EntityState({"PET:rex": entity("Rex", "PET")}, {}))
    assert [m.key for m in matcher.recall(USER, "how is Rex").matches] == ["PET:rex"]
    assert services.store.trigger_tokens(USER).get("entities") is None  # the write freed it
    token = services.store.take_trigger(USER, "entities")
    services.meta.set_meta(USER, opted_out="1")
    assert store.update(USER, token, lambda s: EntityState()) is None  # an opt-out wins


# -- the evaluation (docs/entities.md) ----------------------------------------------------
def test_the_deterministic_eval_meets_the_targets_on_the_labelled_set() -> None:
    from bot.dev.entity_evaluation import evaluate_deterministic, load_users

    users = load_users()
    assert len(users) >= 40 and sum(len(u["messages"]) for u in users) >= 200
    report = evaluate_deterministic(users, threshold=0.85, similarity=0.9, related_weight=0.75)
    assert report["match_recall"] >= 0.90
    assert report["retrieval_coverage"] >= 0.80
    assert report["irrelevant_share"] < 0.20
    assert report["duplicate_rate"] < 0.05
    assert report["near_miss_false_matches"] == 0
