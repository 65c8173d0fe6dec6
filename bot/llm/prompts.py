"""Load prompt files from prompts/ by name; each carries its version in front matter."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Prompt:
    """A prompt template with the name and version logged beside each model call."""

    name: str
    version: str
    text: str

    @property
    def ref(self) -> str:
        """Return `name@version`, the form logs use."""
        return f"{self.name}@{self.version}"


def _parse(name: str, raw: str) -> Prompt:
    meta: dict[str, str] = {}
    body = raw
    if raw.startswith("---\n"):
        header, sep, rest = raw[4:].partition("\n---\n")
        if not sep:
            raise ValueError(f"prompt {name}: front matter is not closed")
        for line in header.splitlines():
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip()
        body = rest
    if "version" not in meta:
        raise ValueError(f"prompt {name}: front matter needs a version")
    return Prompt(name=name, version=meta["version"], text=body.strip())


@lru_cache(maxsize=32)
def load_prompt(name: str, directory: Path) -> Prompt:
    """Return the prompt `directory/name.md`."""
    path = directory / f"{name}.md"
    return _parse(name, path.read_text(encoding="utf-8"))


def system_with_knowledge(system_prompt: Prompt, rules: Prompt | None, unknown_reply: str) -> str:
    """Return the system prompt with the knowledge base's rules after it (as is without rules)."""
    if rules is None:
        return system_prompt.text
    return f"{system_prompt.text}\n\n{rules.text.replace('{unknown_reply}', unknown_reply)}"
