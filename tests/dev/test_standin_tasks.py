"""The stand-in's task extraction: does a new message need chat history or user memory, no model."""

from __future__ import annotations

import pytest

from bot.dev.standin_tasks import TASK_SCHEMA_NAME, extract_request_task

WEATHER = """Known fact keys: name, city, diet
Known entities: Rex (PET), Ana Silva (PERSON)
Summary: The user asked about the weather in Lisbon today; it is sunny.
Recent messages:
User: What's the weather like in Lisbon today?
Assistant: Sunny and about 24 °C.
New message: How does that compare to yesterday?"""
SAFE = {"task": "", "search": "", "depends_on_chat_history": True, "depends_on_user_memory": True, "entities": []}


def req(new: str, keys: str = "(none)", entities: str = "(none)", summary: str = "(none)",
        recent: list[str] | None = None) -> str:
    """Build a request in the app's format."""
    lines = [f"Known fact keys: {keys}", f"Known entities: {entities}", f"Summary: {summary}",
             "Recent messages:", *(recent or ["(none)"]), f"New message: {new}"]
    return "\n".join(lines)


def flags(text: str) -> tuple[bool, bool]:
    """(depends_on_chat_history, depends_on_user_memory)."""
    result = extract_request_task(text)
    return result["depends_on_chat_history"], result["depends_on_user_memory"]


PT_HISTORY = ["User: Como está o tempo em Lisboa hoje?", "Assistant: Sol e 24 °C."]


def test_schema_name() -> None:
    assert TASK_SCHEMA_NAME == "user_task"


def test_weather_follow_up_needs_history_not_memory() -> None:
    result = extract_request_task(WEATHER)
    assert set(result) == {"task", "search", "depends_on_chat_history", "depends_on_user_memory", "entities"}
    assert result["depends_on_chat_history"] is True
    assert result["depends_on_user_memory"] is False
    assert result["entities"] == []
    assert result["task"] == ('Following up on "What\'s the weather like in Lisbon today?": '
                              "How does that compare to yesterday?")


def test_umbrella_needs_memory_not_history() -> None:
    result = extract_request_task(req("Should I take an umbrella today?", keys="city"))
    assert (result["depends_on_chat_history"], result["depends_on_user_memory"]) == (False, True)
    assert result["task"] == "Should I take an umbrella today?"


@pytest.mark.parametrize("recent", [None, PT_HISTORY])
@pytest.mark.parametrize("message", ["Hi!", "thanks!", "Thank you so much", "Obrigado!", "Bonjour"])
def test_greetings_and_thanks_need_nothing(message: str, recent: list[str] | None) -> None:
    assert flags(req(message, keys="name, city", recent=recent)) == (False, False)


def test_known_entity_needs_memory_and_is_listed() -> None:
    result = extract_request_task(req("Is it ok to give Rex chocolate?", keys="dog_name",
                                      entities="Rex (PET), Ana Silva (PERSON)"))
    assert result["depends_on_user_memory"] is True
    assert result["depends_on_chat_history"] is False
    assert result["entities"] == [{"name": "Rex", "type": "PET"}]


def test_entities_by_first_word_in_order_of_appearance() -> None:
    result = extract_request_task(req("Can ana walk rex tomorrow?", entities="Rex (PET), Ana Silva (PERSON)"))
    assert result["entities"] == [{"name": "Ana Silva", "type": "PERSON"}, {"name": "Rex", "type": "PET"}]
    assert extract_request_task(req("Rexford is a town", entities="Rex (PET)"))["entities"] == []


def test_fact_key_word_needs_memory() -> None:
    assert flags(req("What food is good for a dog with a cold?", keys="dog_name"))[1] is True
    assert flags(req("Is this recipe ok for my diet?", keys="diet"))[1] is True
    assert flags(req("Explain how a dietary supplement works", keys="name"))[1] is False


@pytest.mark.parametrize("message", ["e amanhã?", "E no Porto?", "isso é caro?"])
def test_portuguese_follow_up_needs_history(message: str) -> None:
    result = extract_request_task(req(message, recent=PT_HISTORY))
    assert result["depends_on_chat_history"] is True
    assert result["task"] == f'Following up on "Como está o tempo em Lisboa hoje?": {message}'


@pytest.mark.parametrize("message", [
    "y mañana?", "et demain ?", "und morgen?", "Eso es caro?", "Ça coûte combien, ça ?", "Ist das teuer?",
    "What about Porto?", "And tomorrow?", "Make it shorter", "Which is cheaper than the train?",
    "Tell me the first one again please", "Can you do that again but in French?", "more"])
def test_follow_ups_need_history(message: str) -> None:
    assert flags(req(message, recent=["User: Trains from Lisbon to Porto?", "Assistant: Every hour."]))[0] is True


def test_summary_alone_counts_as_history() -> None:
    result = extract_request_task(req("And the day after?", summary="Talked about rain in Porto. Then jokes."))
    assert result["depends_on_chat_history"] is True
    assert result["task"] == 'Following up on "Talked about rain in Porto.": And the day after?'


def test_standalone_question_with_history_needs_none() -> None:
    assert flags(req("Explain how photosynthesis works in plants", recent=PT_HISTORY)) == (False, False)


@pytest.mark.parametrize("message", [
    "How does that compare to yesterday?", "e amanhã?", "And tomorrow?", "it", "What about them?",
    "Make it shorter", "Hi!", "Should I take an umbrella today?"])
def test_no_history_never_needs_history(message: str) -> None:
    result = extract_request_task(req(message, keys="city", entities="Rex (PET)"))
    assert result["depends_on_chat_history"] is False
    assert result["task"] == message


@pytest.mark.parametrize("message", [
    "What should I cook tonight?", "Can you recommend a book?", "Any restaurants near me?", "Qual é o meu nome?",
    "¿Qué me recomiendas?", "Quel est mon film préféré ?", "Was soll ich heute kochen?"])
def test_personal_requests_need_memory(message: str) -> None:
    assert flags(req(message))[1] is True


def test_multiline_new_message_is_one_sentence() -> None:
    assert extract_request_task(req("Write a poem\nabout   the sea"))["task"] == "Write a poem about the sea"


@pytest.mark.parametrize("text", [
    "", "garbage", "New message: hi", WEATHER.replace("Summary:", "Resumo:"), req("   "),
    "\n".join(WEATHER.splitlines()[::-1]), None, 42, b"bytes"])
def test_malformed_request_gets_the_safe_fallback(text: object) -> None:
    assert extract_request_task(text) == SAFE  # type: ignore[arg-type]


def test_fallback_is_a_fresh_copy() -> None:
    extract_request_task("garbage")["entities"].append("x")
    assert extract_request_task("garbage") == SAFE


def test_texts_written_as_the_app_writes_them_are_read_unquoted() -> None:
    """The app sends each text as a JSON string (bot/llm/fence.py inert)."""
    request = ('Known fact keys: (none)\nKnown entities: (none)\nSummary: (none)\nRecent messages:\n'
               'User: "Which museums open on Mondays?"\nAssistant: "The Gulbenkian does not."\n'
               'New message: "¿Y para seis personas?"')
    answer = extract_request_task(request)
    assert answer["depends_on_chat_history"] is True
    assert '""' not in answer["task"] and answer["task"].endswith("¿Y para seis personas?")


def test_with_documents_a_question_is_searched_by_its_task_and_small_talk_by_nothing() -> None:
    with_documents = "Documents' languages: pt\n" + req("a que horas abrem ao domingo?")
    assert extract_request_task(with_documents)["search"] == "a que horas abrem ao domingo?"
    assert extract_request_task("Documents' languages: pt, es\n" + req("obrigado"))["search"] == ""
    assert extract_request_task(req("a que horas abrem ao domingo?"))["search"] == ""  # no documents
