"""docs/architecture.md's table of steps is the code's: the names in ORDER, each step's
module, and what it reads and writes."""

from __future__ import annotations

import re
from pathlib import Path

from bot.conversation.pipeline import ORDER
from tests.conversation.test_steps import step_classes

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (\d+) \| `([a-z-]+)` \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$", re.MULTILINE)


def fields(cell: str) -> set[str]:
    return {f.strip() for f in cell.split(",")} - {"—", ""}


def test_the_steps_table_lists_the_steps_in_their_order() -> None:
    rows = ROW.findall(DOC)
    assert [name for _, name, *_ in rows] == list(ORDER)
    assert [int(n) for n, *_ in rows] == list(range(1, len(ORDER) + 1))


def test_each_row_names_the_steps_module_and_fields() -> None:
    classes = step_classes()
    for _, name, module, reads, writes in ROW.findall(DOC):
        cls = classes[name]
        assert module == cls.__module__.replace(".", "/") + ".py" and (ROOT / module).is_file()
        assert (fields(reads), fields(writes)) == (set(cls.reads), set(cls.writes)), name
