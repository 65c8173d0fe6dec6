"""What a reminder may be (docs/reminders.md): the time zone from the number or the user's own
word, a due time with an offset taken as given, the limits (its time ahead, at most 366 days,
REMINDERS_MAX_PER_USER waiting), on the real Redis."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot import create_app
from bot.reminders.book import ReminderError
from bot.reminders.zones import zone_of_number
from tests.reminders.test_chat import PT, write

pytestmark = pytest.mark.integration

MANAUS_USER = "+5511987654321"  # a São Paulo number, whose user says they are in Manaus


@pytest.fixture
def app(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    return create_app(make_settings(REMINDERS=True, REMINDERS_MAX_PER_USER=3))


def test_the_number_tells_the_zone_where_the_country_has_one_for_nearly_everyone() -> None:
    assert zone_of_number("+351912345678") == "Europe/Lisbon"  # the Azores are on another clock
    assert zone_of_number("+34612345678") == "Europe/Madrid"  # so are the Canaries
    assert zone_of_number("+5511987654321") == "America/Sao_Paulo"
    assert zone_of_number("+5592987654321") == "America/Manaus"  # the area code tells
    assert zone_of_number("+61412345678") is None  # Australia: ask
    assert zone_of_number("not a number") is None


@pytest.mark.cluster
def test_the_users_own_word_wins_and_is_a_session_fact(app) -> None:  # type: ignore[no-untyped-def]
    services = app.extensions["bot.services"]
    assert services.reminders.time_zone(MANAUS_USER).name == "America/Sao_Paulo"
    write(app, MANAUS_USER, "estou em Manaus")
    told = services.reminders.time_zone(MANAUS_USER)
    assert (told.name, told.source) == ("America/Manaus", "user")
    assert services.facts.load(MANAUS_USER, "session")["time_zone"].value == "America/Manaus"
    write(app, MANAUS_USER, "lembra-me amanhã às 9h de ir ao médico")
    [reminder] = services.reminders.list(MANAUS_USER)
    due = datetime.fromtimestamp(reminder.due, ZoneInfo("America/Manaus"))
    assert (due.hour, reminder.tz) == (9, "America/Manaus")


def test_the_limits_and_an_offset_taken_as_given(app) -> None:  # type: ignore[no-untyped-def]
    book = app.extensions["bot.services"].reminders
    tomorrow = (datetime.now(ZoneInfo("Europe/Lisbon")) + timedelta(days=1)).replace(microsecond=0)
    with_offset = tomorrow.astimezone(ZoneInfo("America/Sao_Paulo")).isoformat()
    reminder, _ = book.add(PT, "com offset", with_offset, "whatsapp:+14155238886")
    assert abs(reminder.due - tomorrow.timestamp()) < 1 and reminder.tz == "Europe/Lisbon"
    for due, reason in (("2020-01-01T09:00", "past"), ("amanhã", "bad_time"),
                        ((tomorrow + timedelta(days=400)).replace(tzinfo=None).isoformat(), "too_far")):
        with pytest.raises(ReminderError) as refused:
            book.add(PT, "x", due, "")
        assert refused.value.reason == reason
    with pytest.raises(ReminderError) as empty:
        book.add(PT, "  ", tomorrow.replace(tzinfo=None).isoformat(), "")
    assert empty.value.reason == "empty"
    book.add(PT, "dois", tomorrow.replace(tzinfo=None).isoformat(), "")
    book.add(PT, "três", tomorrow.replace(tzinfo=None).isoformat(), "")
    with pytest.raises(ReminderError) as full:  # REMINDERS_MAX_PER_USER=3 waiting
        book.add(PT, "quatro", tomorrow.replace(tzinfo=None).isoformat(), "")
    assert full.value.reason == "too_many"
    book.cancel(PT, reminder.id)
    assert book.add(PT, "quatro", tomorrow.replace(tzinfo=None).isoformat(), "")[0].text == "quatro"
    with pytest.raises(ReminderError) as unknown:  # a number whose zone is unknown: a time needs its offset
        book.add("+61412345678", "x", tomorrow.replace(tzinfo=None).isoformat(), "")
    assert unknown.value.reason == "no_time_zone"
