"""The cluster pass (docs/testing.md): `make test` runs the tests marked `cluster` a second
time, with user state on a 3-master Redis Cluster. Two checks keep that selection honest:

- every test under tests/storage/ carries the mark (collection fails, naming the test that
  does not): a storage test is a test of keys, scripts and slots;
- with TEST_STORAGE_COVERAGE=required (the Makefile's cluster pass), every storage operation
  of bot/storage/ (each method of a class holding a Redis connection, each function taking
  one) and every Lua script in bot/storage/lua/ ran at least once, in this process, during
  the pass: the session fails naming any that did not, so a new storage operation cannot
  escape the cluster. Line coverage (coverage.py, limited to bot/storage/)
  tells the functions; a wrapper around Scripts tells the scripts.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support import fail_session

ROOT = Path(__file__).resolve().parents[1]
STORAGE = ROOT / "bot" / "storage"
#: The cluster pass sets this to have the session fail on storage code it never ran.
REQUIRED = os.environ.get("TEST_STORAGE_COVERAGE") == "required"


def on_fakeredis(item: pytest.Item) -> bool:
    """Return whether a test runs on fakeredis (the fixture, or a "fakeredis" parameter)."""
    callspec = getattr(item, "callspec", None)
    return "fake_redis" in getattr(item, "fixturenames", ()) or (
        callspec is not None and "fakeredis" in callspec.params.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a storage test that would be left out of the cluster pass; in the cluster pass,
    leave out the tests on fakeredis (no topology of theirs changes), so that what the storage
    check counts ran on the cluster."""
    storage_tests = STORAGE.parent.parent / "tests" / "storage"
    unmarked = [item.nodeid for item in items
                if Path(str(item.fspath)).is_relative_to(storage_tests) and item.get_closest_marker("cluster") is None]
    if unmarked:
        raise pytest.UsageError(
            "tests of keys, scripts and slots run on the cluster too: mark them `cluster` "
            f"(pytestmark in the module): {', '.join(unmarked[:5])}")
    if os.environ.get("TEST_REDIS_TOPOLOGY") == "cluster":
        fake = [item for item in items if on_fakeredis(item)]
        if fake:
            config.hook.pytest_deselected(items=fake)
            items[:] = [item for item in items if not on_fakeredis(item)]


#: Where storage code takes its connection: a store class's __init__ parameter (or a class
#: annotation, for a mixin such as JobTriggers), or a module function's parameter.
CONNECTION_NAMES = {"client", "redis", "connection", "pipe"}


def storage_functions() -> Iterator[tuple[str, str, set[int]]]:
    """Yield (file, qualified name, lines of its body) for every storage operation in
    bot/storage/: each method of a class that holds a Redis connection, and each module
    function that takes one (records, keys and their pure helpers are left out: nothing of
    them differs on a cluster)."""
    for path in sorted(STORAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and _holds_connection(node):
                yield from _functions(str(path), node.body, f"{node.name}.")
            elif isinstance(node, ast.FunctionDef) and CONNECTION_NAMES & {a.arg for a in node.args.args}:
                yield from _functions(str(path), [node], "")


def _holds_connection(cls: ast.ClassDef) -> bool:
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in CONNECTION_NAMES:
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            return bool(CONNECTION_NAMES & {a.arg for a in node.args.args})
    return False


def _functions(path: str, body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, str, set[int]]]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            statements = node.body
            if statements and isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant):
                statements = statements[1:]  # the docstring
            if all(isinstance(s, (ast.Pass, ast.Expr)) and not isinstance(getattr(s, "value", None), ast.Call)
                   for s in statements):
                continue  # `...` or `pass`: an interface
            lines = {n.lineno for s in statements for n in ast.walk(s) if isinstance(n, ast.stmt)}
            yield path, f"{prefix}{node.name}", lines


class StorageCoverage:
    """What of bot/storage/ ran in this process since start()."""

    def __init__(self) -> None:
        import coverage

        self.coverage = coverage.Coverage(include=[str(STORAGE / "*.py")], data_file=None, branch=False,
                                          config_file=False)
        self.scripts: set[str] = set()

    def start(self) -> None:
        """Measure from now, and record each script run through bot/storage/scripts.py."""
        from bot.storage.scripts import Scripts

        seen = self.scripts
        run, run_with_reads = Scripts.run, Scripts.run_with_reads

        def recorded_run(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            seen.add(name)
            return run(self, name, *args, **kwargs)

        def recorded_reads(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            seen.add(name)
            return run_with_reads(self, name, *args, **kwargs)

        Scripts.run, Scripts.run_with_reads = recorded_run, recorded_reads  # type: ignore[method-assign]
        self.coverage.start()

    def missed(self) -> list[str]:
        """Stop measuring; return the functions and scripts that never ran."""
        self.coverage.stop()
        data = self.coverage.get_data()
        ran = {path: set(data.lines(path) or ()) for path in data.measured_files()}
        missed = [f"{Path(path).name}:{name}" for path, name, lines in storage_functions()
                  if not lines & ran.get(path, set())]
        scripts = {p.stem for p in (STORAGE / "lua").glob("*.lua")} - {"helpers"}
        missed += [f"lua/{name}.lua" for name in sorted(scripts - self.scripts)]
        return missed


_coverage: StorageCoverage | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Measure bot/storage/ through the cluster pass, when the pass requires it."""
    global _coverage
    if REQUIRED:
        _coverage = StorageCoverage()
        _coverage.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the cluster pass if some storage code never ran on the cluster."""
    if _coverage is None:
        return
    missed = _coverage.missed()
    if not missed:
        return
    fail_session(session, "storage code that never ran in the cluster pass (mark a test of it `cluster`):", missed)
