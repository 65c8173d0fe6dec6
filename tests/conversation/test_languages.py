"""The bot's own words in the user's language (docs/languages.md): complete catalogs, which
language a message is in, commands in Portuguese and Spanish through the signed webhook, and
fixed replies (erase, help, handover notice, apology) in the language the user writes."""

from __future__ import annotations

import re
import shutil
import string
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bot import create_app
from bot.config import DEFAULT_PROMPTS_DIR
from bot.conversation.catalog import LANGUAGES, load_catalog
from bot.conversation.language import choose, detect
from bot.conversation.replies import shipped
from bot.exceptions import ConfigError
from bot.storage.keys import user_keys
from bot.users.handover import take_over
from tests.conftest import USER, inbound_form, sign

SAY = shipped()


# -- the catalogs --------------------------------------------------------------------------
def test_every_language_has_every_reply_and_command() -> None:
    for language in LANGUAGES:
        assert set(SAY.texts[language]) == set(SAY.texts["en"]), language
        assert set(SAY.phrases[language]) == set(SAY.phrases["en"]), language
        assert all(SAY.texts[language].values()) and all(SAY.phrases[language].values()), language


def names(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(SAY.texts["en"]))
def test_a_text_takes_the_same_names_in_every_language(key: str) -> None:
    assert {language: names(SAY.texts[language][key]) for language in LANGUAGES} == {
        language: names(SAY.texts["en"][key]) for language in LANGUAGES}


def test_a_catalog_that_lacks_a_text_stops_startup_naming_it(tmp_path: Path) -> None:
    for language in LANGUAGES:
        shutil.copy(DEFAULT_PROMPTS_DIR / f"replies.{language}.toml", tmp_path)
    pt = tmp_path / "replies.pt.toml"
    pt.write_text(re.sub(r"(?m)^busy = .*\n", "", pt.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"replies\.pt\.toml: reply 'busy'"):
        load_catalog(tmp_path, DEFAULT_PROMPTS_DIR)


def test_an_operators_catalog_replaces_a_text_and_a_missing_one_keeps_the_shipped(tmp_path: Path) -> None:
    es = (DEFAULT_PROMPTS_DIR / "replies.es.toml").read_text(encoding="utf-8")
    (tmp_path / "replies.es.toml").write_text(
        es.replace('busy = "Estoy recibiendo', 'busy = "Clínica Sol: estamos con mucha gente. Estoy recibiendo'),
        encoding="utf-8")
    mine = load_catalog(tmp_path, DEFAULT_PROMPTS_DIR)
    assert mine.text("busy", "es").startswith("Clínica Sol:") and mine.text("busy", "pt") == SAY.text("busy", "pt")


# -- which language a message is in --------------------------------------------------------
@pytest.mark.parametrize(("text", "language"), [
    ("sim", "pt"), ("Sí", "es"), ("si", "es"), ("YES", "en"), ("obrigada!", "pt"), ("gracias", "es"),
    ("Bom dia", "pt"), ("apaga os meus dados", "pt"), ("Borra mis datos.", "es"), ("delete my data", "en"),
    ("A que horas abrem ao domingo?", "pt"), ("¿Atienden niños?", "es"), ("Tengo una cita mañana por la tarde", "es"),
    ("Tenho uma consulta amanhã de manhã", "pt"), ("What should I eat tonight?", "en"),
    ("Can I book a check-up for Tuesday?", "en"), ("Olá, chamo-me Rui e vivo em Braga.", "pt"),
    ("Hola, me llamo Lucía y vivo en Sevilla.", "es"),
    ("ok", None), ("👍", None), ("Rui", None), ("por favor", None), ("/reset", None), ("12345", None),
])
def test_a_message_tells_its_language_or_nothing(text: str, language: str | None) -> None:
    assert detect(text, SAY) == language


def test_the_language_is_the_messages_else_the_last_known_else_the_businesss() -> None:
    assert choose("es", "pt", None, default="en") == "es"
    assert choose(None, "pt", "es", default="en") == "pt"
    assert choose(None, "", "es", default="en") == "es"
    assert choose(None, "", None, default="pt") == "pt"
    assert choose(None, "fr", None, default="es") == "es"  # only languages the bot speaks


# -- through the webhook -------------------------------------------------------------------
@pytest.fixture
def say(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    """say(body, user=USER, **settings) -> the TwiML reply."""
    clients: dict[str, object] = {}

    def post(body: str, user: str = USER, **overrides: object) -> str:
        key = repr(sorted(overrides.items()))
        if key not in clients:
            clients[key] = create_app(make_settings(**overrides)).test_client()
        form = inbound_form(body, user=user)
        response = clients[key].post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})  # type: ignore[attr-defined]
        assert response.status_code == 200
        return "".join(m.text or "" for m in ElementTree.fromstring(response.data).iter("Message"))

    return post


@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.parametrize(("language", "ask", "yes"), [("pt", "Apaga os meus dados", "Sim"),
                                                      ("es", "borra mis datos", "sí")])
def test_erase_and_its_yes_in_portuguese_and_spanish(say, model, services, redis_client, language, ask, yes) -> None:  # type: ignore[no-untyped-def]
    say("Olá! Quero saber os horários da clínica para a próxima semana, por favor.")
    assert say(ask) == SAY.text("erase_confirm", language, minutes=10)
    assert model.requests()[-1]["messages"][-1]["content"] != ask  # a command, not a model turn
    assert say(yes) == SAY.text("erased", language)
    assert [k for k in user_keys(USER) if redis_client.exists(k) and not k.startswith("chat_seen")] == []


@pytest.mark.integration
def test_stop_remembering_and_help_answer_in_the_users_words(say, services) -> None:  # type: ignore[no-untyped-def]
    assert say("Deixa de te lembrar de mim") == SAY.text("opt_out", "pt")
    assert services.meta.meta(USER).get("opted_out") == "1"
    assert say("vuelve a recordarme") == SAY.text("opt_in", "es")
    assert services.meta.meta(USER).get("opted_out") != "1"
    assert say("Ajuda") == SAY.text("help", "pt") and say("ayuda") == SAY.text("help", "es")
    assert say("recomeçar") == SAY.text("reset", "pt")


@pytest.mark.integration
def test_a_reply_that_tells_nothing_keeps_the_users_last_language(say, model, services) -> None:  # type: ignore[no-untyped-def]
    say("Boa tarde, queria marcar uma limpeza dentária para sexta-feira.")
    assert services.store.load(USER).language == "pt"
    model.script({"status": 500}, {"status": 500})
    assert say("ok") == SAY.text("fallback", "pt")  # "ok" tells nothing: the last language holds
    assert say("ok", user="+34600000001", BOT_LANGUAGE="es") == SAY.text("fallback", "es")  # a new user: the business's


@pytest.mark.integration
@pytest.mark.cluster
def test_the_handover_notice_is_in_the_users_language(say, services) -> None:  # type: ignore[no-untyped-def]
    take_over(services.users, services.handover, USER, actor="console:ana", via="console")
    assert say("Hola, ¿alguien puede ayudarme con mi factura?") == SAY.text("handover_notice", "es")
    assert say("¿Hola?") == ""  # the notice once, then silence while the person answers
    other = "+351912000111"
    take_over(services.users, services.handover, other, actor="console:ana", via="console")
    assert say("Olá, preciso de falar com alguém", user=other) == SAY.text("handover_notice", "pt")
    third = "+447700900555"
    take_over(services.users, services.handover, third, actor="console:ana", via="console")
    assert say("Hi there", user=third, HANDOVER_NOTICE="Ana from the desk will reply.") == "Ana from the desk will reply."


@pytest.mark.integration
def test_the_rate_limit_notice_is_in_spanish(say, services) -> None:  # type: ignore[no-untyped-def]
    replies = [say(f"Pregunta número {i}: ¿qué horarios tienen los sábados?", RATE_LIMIT_PER_MINUTE=2) for i in range(4)]
    assert replies[2] == SAY.text("rate_limited", "es") and replies[3] == ""
