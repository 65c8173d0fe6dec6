"""Settings fail at startup, naming the variable."""

import pytest

from bot.config import load_settings
from bot.exceptions import ConfigError

REQUIRED = {"TWILIO_AUTH_TOKEN": "t", "OPENAI_API_KEY": "k"}


def test_missing_secret_is_named() -> None:
    with pytest.raises(ConfigError, match="TWILIO_AUTH_TOKEN"):
        load_settings(env_files=False, OPENAI_API_KEY="k")


def test_a_keyless_local_model_server_needs_no_api_key() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY: required unless OPENAI_BASE_URL"):
        load_settings(env_files=False, TWILIO_AUTH_TOKEN="t")
    settings = load_settings(env_files=False, TWILIO_AUTH_TOKEN="t", OPENAI_BASE_URL="http://127.0.0.1:11434/v1")
    assert settings.OPENAI_API_KEY is None and settings.openai_api_key  # the SDK wants some value


def test_read_only_tools_need_neither_secret() -> None:
    settings = load_settings(env_files=False, need=())
    assert settings.TWILIO_AUTH_TOKEN is None
    with pytest.raises(ConfigError, match="PSEUDONYM_SECRET"):
        load_settings(env_files=False, need=("pseudonym",))


def test_environment_then_dotenv_then_make_run(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".run").mkdir()
    (tmp_path / ".run" / "dev.env").write_text("REDIS_URL=redis://dev-env/0\nRECENT_PAIRS=3\nOPENAI_MODEL=m1\n")
    (tmp_path / ".env").write_text("REDIS_URL=redis://dotenv/0\nRECENT_PAIRS=4\n")
    monkeypatch.setenv("RECENT_PAIRS", "6")
    settings = load_settings(need=())
    assert (settings.RECENT_PAIRS, settings.REDIS_URL, settings.OPENAI_MODEL) == (6, "redis://dotenv/0", "m1")
    # an empty value copied from .env.example is unset: make run's development token still counts
    (tmp_path / ".run" / "dev.env").write_text("TWILIO_AUTH_TOKEN=dev-token\n")
    (tmp_path / ".env").write_text("TWILIO_AUTH_TOKEN=\n")
    assert load_settings(need=()).TWILIO_AUTH_TOKEN == "dev-token"


def test_malformed_number_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECENT_PAIRS", "five")
    with pytest.raises(ConfigError, match="RECENT_PAIRS"):
        load_settings(env_files=False, **REQUIRED)


def test_defaults_follow_the_design_note() -> None:
    s = load_settings(env_files=False, **REQUIRED)
    assert (s.RECENT_PAIRS, s.SUMMARY_EVERY_N_PAIRS, s.MAX_PROMPT_TOKENS) == (5, 10, 800)
    assert s.OPENAI_MODEL == "gpt-4o-mini" and s.MIN_PAIR_CHARS == 50


def test_model_budget_must_fit_twilio_timeout() -> None:
    with pytest.raises(ConfigError, match="LLM_TIMEOUT_S"):
        load_settings(env_files=False, LLM_TIMEOUT_S=8, LLM_MAX_RETRIES=2, **REQUIRED)


def test_a_burst_is_hurried_before_any_pair_drops() -> None:
    with pytest.raises(ConfigError, match="PENDING_HURRY_BYTES must be below PENDING_MAX_BYTES"):
        load_settings(env_files=False, PENDING_HURRY_BYTES=5000, PENDING_MAX_BYTES=4000, **REQUIRED)


def test_production_refuses_the_standin() -> None:
    with pytest.raises(ConfigError, match="MODEL_STANDIN"):
        load_settings(env_files=False, APP_ENV="production", MODEL_STANDIN=True, **REQUIRED)


def test_public_base_url_must_be_http() -> None:
    with pytest.raises(ConfigError, match="PUBLIC_BASE_URL"):
        load_settings(env_files=False, PUBLIC_BASE_URL="bot.example.com", **REQUIRED)
    s = load_settings(env_files=False, PUBLIC_BASE_URL="https://bot.example.com/", **REQUIRED)
    assert s.PUBLIC_BASE_URL == "https://bot.example.com"


def test_env_example_lists_every_setting() -> None:
    from pathlib import Path

    from bot.config import Settings

    text = (Path(__file__).parent.parent / ".env.example").read_text()
    listed = {line.lstrip("#").split("=", 1)[0].strip() for line in text.splitlines() if "=" in line}
    assert set(Settings.model_fields) <= listed


def test_memory_block_must_fit_the_prompt_budget() -> None:
    with pytest.raises(ConfigError, match="MEMORY_MAX_TOKENS"):
        load_settings(env_files=False, MEMORY_MAX_TOKENS=500, **REQUIRED)


def test_a_system_prompt_too_big_for_its_frame_stops_startup(tmp_path, make_settings) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from bot.config import DEFAULT_PROMPTS_DIR
    from bot.services import build_services

    for name in ("summary", "extract_facts", "extract_entities", "extract_task"):
        shutil.copy(DEFAULT_PROMPTS_DIR / f"{name}.md", tmp_path)
    (tmp_path / "reply_system.md").write_text("---\nversion: 9\n---\n" + "Be helpful and brief. " * 60)
    with pytest.raises(ConfigError, match="reply_system.md .*takes"):
        build_services(make_settings(PROMPTS_DIR=tmp_path))
    build_services(make_settings())  # the shipped prompt fits
    # the knowledge base's rules carry KNOWLEDGE_UNKNOWN_REPLY: a long one must fit too
    with pytest.raises(ConfigError, match="KNOWLEDGE_UNKNOWN_REPLY takes"):
        build_services(make_settings(KNOWLEDGE_UNKNOWN_REPLY="Sorry, I do not know that. " * 10))
