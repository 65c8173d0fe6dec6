"""The stand-in's fact extraction: plain first-person statements, no model."""

from __future__ import annotations

import pytest

from bot.dev.standin_facts import extract_request_facts
from bot.memory.extraction import render_request
from bot.storage.records import Pair

ASSISTANT = "Assistant (context only; never a source of facts): "


def req(*user: str, known: list[str] | None = None, assistant: str = "Okay.") -> str:
    """Build a request in the app's format, one User/Assistant pair per message."""
    lines = ["Known facts:"] + ([f"- {k}" for k in known] if known else ["(none)"])
    lines += ["", "New exchange:"]
    for message in user:
        lines += [f"User: {message}", ASSISTANT + assistant]
    return "\n".join(lines)


def kv(*user: str, **kw) -> dict[str, str]:
    return {f["key"]: f["value"] for f in extract_request_facts(req(*user, **kw))}


@pytest.mark.parametrize("message, expected", [
    ("my name is Ana and I live in Porto", {"name": "Ana", "city": "Porto"}),
    ("Hi! I'm Ana, I live in New York and I'm allergic to peanuts",
     {"name": "Ana", "city": "New York", "allergies": "peanuts"}),
    ("call me Ana", {"name": "Ana"}),
    ("I am Ana Silva.", {"name": "Ana Silva"}),
    ("I'm based in Lisbon with my wife", {"city": "Lisbon"}),
    ("I just moved to San Francisco since May", {"city": "San Francisco"}),
    ("I'm from Lisbon", {"hometown": "Lisbon"}),
    ("I have a peanut allergy", {"allergies": "peanut"}),
    ("I'm vegetarian", {"diet": "vegetarian"}),
    ("I am vegan!", {"diet": "vegan"}),
    ("I'm a vegetarian", {"diet": "vegetarian"}),
    ("I don't eat meat", {"diet": "no meat"}),
    ("I work as a nurse", {"occupation": "nurse"}),
    ("I'm a teacher", {"occupation": "teacher"}),
    ("I am an engineer", {"occupation": "engineer"}),
    ("I'm a software engineer at Google", {"occupation": "software engineer"}),
    ("I work at Acme", {"employer": "Acme"}),
    ("I have a dog named Rex", {"dog_name": "Rex"}),
    ("my dog Rex loves the park", {"dog_name": "Rex"}),
    ("my cat is called Mimi", {"cat_name": "Mimi"}),
    ("I have a dog", {"pets": "dog"}),
    ("I love sushi and I hate olives", {"likes": "sushi", "dislikes": "olives"}),
    ("I really enjoy hiking.", {"likes": "hiking"}),
    ("I like jazz because it relaxes me", {"likes": "jazz"}),
    ("I don't like mushrooms", {"dislikes": "mushrooms"}),
    ("I'm a big fan of jazz", {"likes": "jazz"}),
    ("I love sushi but not olives", {"likes": "sushi"}),
    ("I have two cats", {"pets": "cat"}),
    ("I’m Ana", {"name": "Ana"}),  # curly apostrophe
    ("MY NAME IS Ana", {"name": "Ana"}),
    ("my sister lives in Rome and I live in Porto", {"city": "Porto"}),
    ("Where is Rome? I live in Porto.", {"city": "Porto"}),
])
def test_extracts(message: str, expected: dict[str, str]) -> None:
    assert kv(message) == expected


@pytest.mark.parametrize("message", [
    "I'm tired", "I'm fine, thanks", "I'm allergic", "Ciao", "I am happy today",
    "do you know if I live in Paris?", "if I lived in Paris I'd be happy",
    "I wish I lived in Paris", "I'm not vegan", "I don't live in Paris",
    "my sister lives in Rome", "my friend lives in Rome",
    "my sister is allergic to nuts", "is my name Ana?", "I'm not allergic to peanuts",
    "I'd love a coffee", "I love you", "I'm a little tired", "my name is not important",
    "I'm going to move to Berlin", "my mom is a teacher", "I think so. Maybe.",
])
def test_extracts_nothing(message: str) -> None:
    assert extract_request_facts(req(message)) == []


def test_assistant_and_known_facts_ignored() -> None:
    text = req("Ciao", known=['name = "Ana"', 'city = "Porto"'],
               assistant="my name is Bot and I live in Paris")
    assert extract_request_facts(text) == []


def test_fact_shape_and_scores() -> None:
    facts = extract_request_facts(req("my name is Ana and I'm allergic to shellfish"))
    assert [f["key"] for f in facts] == ["name", "allergies"]
    name, allergy = facts
    assert set(name) == {"key", "value", "category", "confidence", "importance",
                         "scope", "explicit", "temporal_stability"}
    assert (name["category"], name["importance"], name["confidence"]) == ("identity", 0.9, 0.9)
    assert (allergy["category"], allergy["importance"]) == ("health", 0.95)
    assert name["scope"] == "user" and name["explicit"] is False


def test_categories() -> None:
    facts = extract_request_facts(req(
        "I live in Porto. I work as a nurse. I have a dog named Rex. I like jazz. I'm vegan"))
    cats = {f["key"]: (f["category"], f["importance"]) for f in facts}
    assert cats == {"city": ("location", 0.8), "occupation": ("work", 0.7),
                    "dog_name": ("family", 0.6), "likes": ("preference", 0.5),
                    "diet": ("diet", 0.8)}


@pytest.mark.parametrize("message", ["remember that my name is Ana",
                                     "Please remember: my name is Ana",
                                     "please remember that my name is Ana"])
def test_explicit(message: str) -> None:
    (fact,) = extract_request_facts(req(message))
    assert (fact["key"], fact["value"], fact["explicit"]) == ("name", "Ana", True)


def test_explicit_only_for_that_message() -> None:
    facts = extract_request_facts(req("remember that I'm vegan", "I live in Porto"))
    assert {f["key"]: f["explicit"] for f in facts} == {"diet": True, "city": False}


def test_later_statement_overrides() -> None:
    assert kv("I live in Porto", "Actually I moved to Lisbon") == {"city": "Lisbon"}


def test_likes_are_joined() -> None:
    assert kv("I love sushi", "I also like jazz. I love sushi!") == {"likes": "sushi, jazz"}


def test_non_user_lines_with_user_word_ignored() -> None:
    text = "Known facts:\n(none)\n\nNew exchange:\nNot User: my name is Bob\n"
    assert extract_request_facts(text) == []


def test_it_reads_the_request_the_bot_really_sends() -> None:
    text = render_request({}, [Pair(user="my name is Ana and I live in Porto", assistant="Hi Ana, my name is Bot", ts=0.0)])
    assert {f["key"]: f["value"] for f in extract_request_facts(text)} == {"name": "Ana", "city": "Porto"}


# -- Portuguese and Spanish, and family members in all three --------------------------------
@pytest.mark.parametrize("message, expected", [
    ("Olá, chamo-me Rui e vivo em Braga. Sou vegetariano.", {"name": "Rui", "city": "Braga", "diet": "vegetariano"}),
    ("Hola, me llamo Lucía y vivo en Sevilla. Soy vegana.", {"name": "Lucía", "city": "Sevilla", "diet": "vegana"}),
    ("My son is called Jack.", {"son_name": "Jack"}),
    ("O meu filho chama-se Jack.", {"son_name": "Jack"}),
    ("Mi hijo se llama Jack.", {"son_name": "Jack"}),
    ("A minha mulher chama-se Inês e tenho uma filha chamada Maria", {"wife_name": "Inês", "daughter_name": "Maria"}),
    ("Mi marido se llama Pedro", {"husband_name": "Pedro"}),
    ("O meu nome é Ana Sousa", {"name": "Ana Sousa"}),
    ("Mi nombre es Carmen", {"name": "Carmen"}),
    ("Sou o João", {"name": "João"}),
    ("Soy Lucía", {"name": "Lucía"}),
    ("Moro no Rio de Janeiro", {"city": "Rio de Janeiro"}),
    ("Vivo em São Paulo", {"city": "São Paulo"}),
    ("Sou de Braga", {"hometown": "Braga"}),
    ("Soy de Valencia", {"hometown": "Valencia"}),
    ("Sou alérgica ao marisco", {"allergies": "marisco"}),
    ("Tengo alergia a los frutos secos", {"allergies": "frutos secos"}),
    ("Não como carne", {"diet": "no carne"}),
    ("Trabalho como enfermeira no Hospital de Santa Maria", {"occupation": "enfermeira"}),
    ("Soy profesora", {"occupation": "profesora"}),
    ("Trabalho na Sonae", {"employer": "Sonae"}),
    ("Gosto muito de fado", {"likes": "fado"}),
    ("Me encanta el flamenco", {"likes": "flamenco"}),
])
def test_extracts_portuguese_spanish_and_family(message: str, expected: dict[str, str]) -> None:
    assert kv(message) == expected


@pytest.mark.parametrize("message", [
    "Não sou vegetariano", "No soy vegana", "No vivo en Madrid", "A minha irmã vive em Roma",
    "Mi hermana vive en Roma", "Se eu vivesse em Paris seria feliz", "Si viviera en Madrid",
    "¿Vivo en Madrid?", "Tenho uma consulta amanhã", "Quero marcar uma limpeza", "Quiero reservar una mesa",
    "Gostaria de viver em Lisboa", "Me gustaría vivir en Madrid",
])
def test_extracts_nothing_in_portuguese_and_spanish(message: str) -> None:
    assert extract_request_facts(req(message)) == []


def test_family_names_are_family_facts_and_a_reminder_is_explicit() -> None:
    (son,) = extract_request_facts(req("Lembra-te que o meu filho chama-se Tiago"))
    assert (son["key"], son["value"], son["category"], son["explicit"]) == ("son_name", "Tiago", "family", True)
