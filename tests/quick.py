"""`make test-quick` (docs/testing.md): the unit tests, and every test of what changed since
main, on one Redis: a developer's loop, not CI's (`make test` stays the one command).

What changed: the files that differ from main's merge base (or from BASE=<ref>), whether
committed, staged, modified or new. A test module is chosen when it changed itself, when it
imports a changed module of bot/ or workers/ (`import bot.x.y`, `from bot.x.y import …`,
`from bot.x import y`), or when it names a changed file that is not Python (a prompt, a Lua
script, a template, a docs page) by its file name. A change to the tests' own support
(conftest.py, cli_support.py…) chooses every test.

    python -m tests.quick [pytest options…]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support import imported_names

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: The environment variable through which the chosen test files reach the plugin below.
CHOSEN_VAR = "TEST_QUICK"


def git(*args: str) -> str:
    """Return what a git command prints in the checkout."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def changed_files(base: str | None = None) -> list[str]:
    """Return the paths (relative to the checkout) that differ from `base`, else from main's
    merge base with HEAD; uncommitted and untracked files included."""
    if base is None:
        try:
            base = git("merge-base", "HEAD", "main").strip()
        except subprocess.CalledProcessError:
            base = "HEAD"
    names = set(git("diff", "--name-only", base).split())  # committed since base, staged and modified
    names |= set(git("ls-files", "--others", "--exclude-standard").split())
    return sorted(n for n in names if (ROOT / n).exists())


def module_of(path: str) -> str | None:
    """Return the dotted module of a Python file of bot/ or workers/, else None."""
    parts = Path(path).with_suffix("").parts
    if path.endswith(".py") and parts and parts[0] in ("bot", "workers"):
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def chosen_tests(changed: list[str]) -> list[str] | None:
    """Return the test files to run whole for these changes (None: every test)."""
    test_files = sorted(TESTS.rglob("test_*.py"))
    chosen: set[Path] = set()
    modules = {m for m in (module_of(p) for p in changed) if m}
    others = [Path(p) for p in changed if not p.endswith(".py")]
    for path in changed:
        full = ROOT / path
        if full.is_relative_to(TESTS) and full.suffix == ".py":
            if full.name.startswith("test_"):
                chosen.add(full)
            else:
                return None  # the tests' own support: conftest.py, cli_support.py, cluster_pass.py…
    for test in test_files:
        if modules & imported_names(test):
            chosen.add(test)
        elif others:
            text = test.read_text(encoding="utf-8")
            if any(other.name in text or (other.stem in text and len(other.stem) > 5) for other in others):
                chosen.add(test)
    return sorted(str(p.relative_to(ROOT)) for p in chosen)


def main(argv: list[str] | None = None) -> int:
    """Choose, say what, run pytest; return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    changed = changed_files(os.environ.get("BASE") or None)
    chosen = chosen_tests(changed)
    print(f"test-quick: {len(changed)} file(s) changed since main", file=sys.stderr)
    if chosen is None:
        print("test-quick: the tests' own support changed: every test", file=sys.stderr)
        env = dict(os.environ)
    else:
        shown = ", ".join(chosen[:8]) + (" …" if len(chosen) > 8 else "")
        print(f"test-quick: the unit tests, and {len(chosen)} module(s) of tests whole: {shown or 'none'}",
              file=sys.stderr)
        env = {**os.environ, CHOSEN_VAR: os.pathsep.join(chosen)}
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", *args], cwd=ROOT, env=env)
    print(f"test-quick: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
