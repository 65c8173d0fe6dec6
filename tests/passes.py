"""How `make test-quick` narrows a run (docs/testing.md): with TEST_QUICK set (by tests/quick.py),
only the unit tests (those not marked `integration`) and the chosen test files run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the unit tests and the chosen files; deselect the rest (reported as deselected)."""
    chosen = os.environ.get("TEST_QUICK")
    if chosen is None:
        return
    files = {str((ROOT / f).resolve()) for f in chosen.split(os.pathsep) if f}
    keep, drop = [], []
    for item in items:
        whole = str(Path(str(item.fspath)).resolve()) in files
        (keep if whole or item.get_closest_marker("integration") is None else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
