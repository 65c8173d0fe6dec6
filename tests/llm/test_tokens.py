"""tiktoken works with no network: the model's encoding if cached, else the bundled one."""

import hashlib
import shutil
import socket
from pathlib import Path

import pytest
import tiktoken_ext

from bot.llm import tokens

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Fail any connection attempt and point tiktoken at an empty cache."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.encoding_for.cache_clear()
    yield tmp_path
    tokens.encoding_for.cache_clear()


def test_uncached_model_encoding_falls_back_to_bundled() -> None:
    assert tokens.encoding_for("gpt-4o-mini").name == tokens.OFFLINE_ENCODING


def test_unknown_model_uses_bundled() -> None:
    assert tokens.encoding_for("some-local-llama").name == tokens.OFFLINE_ENCODING


def test_cached_model_encoding_is_used(no_network: Path) -> None:
    bundled = Path(tiktoken_ext.__path__[0]) / "data" / "cl100k_base.tiktoken"
    shutil.copy(bundled, no_network / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    assert tokens.encoding_for("gpt-4").name == "cl100k_base"


def test_truncate_respects_budget() -> None:
    counter = tokens.TokenCounter("gpt-4o-mini")
    text = "word " * 1000
    cut = counter.truncate(text, 50)
    assert counter.count(cut) <= 51 and cut.endswith("[…]")
    assert counter.truncate("short", 50) == "short"
