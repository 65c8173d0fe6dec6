"""Small helpers the suite's own tooling shares (tests/quick.py, tests/test_layers.py,
tests/cluster_pass.py, tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest


def imported_names(path: Path) -> set[str]:
    """Return every module a Python file imports, at any depth (lazy imports too), and
    `package.name` for each `from package import name` (a module or not)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def fail_session(session: pytest.Session, title: str, lines: list[str]) -> None:
    """Print what went wrong after the last test, in red, and fail the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(title, red=True)
        for line in lines:
            reporter.write_line(f"  {line}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
