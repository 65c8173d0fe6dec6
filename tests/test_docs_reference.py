"""The docs pages that list code facts stay true: every setting in docs/configuration.md with
its default, every Redis key in docs/redis-keys.md, and every page README's map names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bot.jobs.queue as queue
import bot.storage.keys as keys
from bot.config import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONFIG = (DOCS / "configuration.md").read_text(encoding="utf-8")
KEYS = (DOCS / "redis-keys.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (`[A-Z_]+`(?: / `[A-Z_]+`)*) \| ([^|]+) \|", re.MULTILINE)


def settings_rows() -> dict[str, str]:
    """Return each documented setting and the default the table gives it."""
    rows = {}
    for names_cell, defaults_cell in ROW.findall(CONFIG):
        names = re.findall(r"`([A-Z_]+)`", names_cell)
        defaults = [d.strip() for d in defaults_cell.split(" / ")]
        for i, name in enumerate(names):
            rows[name] = defaults[i] if len(defaults) == len(names) else defaults_cell.strip()
    return rows


def procfile_settings() -> dict[str, str]:
    """Return the settings the Procfile reads itself (`${NAME:-default}`), with their defaults."""
    procfile = (ROOT / "Procfile").read_text(encoding="utf-8")
    return dict(re.findall(r"\$\{([A-Z_]+):-([^}$]+)\}", procfile))


def test_every_setting_is_in_the_table_and_nothing_else() -> None:
    assert set(settings_rows()) == set(Settings.model_fields) | set(procfile_settings())


def test_the_procfiles_defaults_are_the_tables() -> None:
    rows = settings_rows()
    assert {name: rows[name] for name in procfile_settings()} == procfile_settings()


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_a_numbers_default_is_the_codes(name: str) -> None:
    default = Settings.model_fields[name].default
    documented = settings_rows()[name]
    if isinstance(default, bool):
        assert documented.lower() in ("true", "false") and documented.lower() == str(default).lower()
    elif isinstance(default, (int, float)) and re.fullmatch(r"[\d,.]+", documented):
        assert float(documented.replace(",", "")) == float(default)


def key_names() -> set[str]:
    """Return every key and prefix the code names."""
    names = {spec.prefix for spec in keys.USER_KEYS}
    names |= {v for k, v in vars(keys).items() if k.endswith(("_KEY", "_PREFIX")) and isinstance(v, str)}
    names |= {queue.OUTAGE_KEY, queue.PROBE_LOCK_KEY}
    return names - {keys.KB_ANCHOR_PREFIX}  # a field inside knowledge:{kb}:vectors, named in its row


def test_every_key_is_in_the_key_table() -> None:
    table = "\n".join(line.split(" | ")[0] for line in KEYS.splitlines() if line.startswith("| `"))
    assert [name for name in sorted(key_names()) if f"`{name}" not in table] == []


def test_every_page_in_readmes_map_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = re.findall(r"\]\((docs/[a-z-]+\.md)\)", readme)
    assert len(set(pages)) >= 14 and [p for p in pages if not (ROOT / p).is_file()] == []
    assert len(readme.splitlines()) <= 250
