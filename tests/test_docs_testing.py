"""docs/testing.md stays true: its table of markers is pyproject.toml's, and the Makefile's
cluster pass sets what tests/cluster_pass.py reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def test_the_markers_table_is_pyprojects() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    names = {line.split(":", 1)[0] for line in declared}
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", PAGE, re.MULTILINE))
    assert documented == names


def test_the_cluster_pass_is_run_as_the_page_says() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "TEST_REDIS_TOPOLOGY=cluster TEST_EMBEDDINGS=off TEST_STORAGE_COVERAGE=required" in makefile
    assert "-m cluster" in makefile and "tests.quick" in makefile
