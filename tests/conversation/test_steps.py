"""The steps declare what they read and write, and the declarations are true.

Plays the part of spaCy's analyze_pipes: every `turn.<record>.<field>` a step's module touches
is found in its source, compared with the step's `reads` and `writes`, and no step may read a
field that only a later step writes.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import bot.conversation.steps as steps_package
from bot.conversation.pipeline import ORDER, OPTIONAL

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ("heard", "stored", "found", "answer", "record")
#: Turn's own attributes a step may use freely: the message and the turn's control.
CONTROL = ("msg", "received", "deadline", "claim_token", "stopped", "finally_", "remaining")
#: What Turn's methods touch (bot/conversation/turn.py).
METHODS = {
    "final_reply": ({"answer.reply", "heard.reply_prefix"}, set()),
    "usage": ({"answer.completion", "answer.tool_rounds", "found.task_completion", "heard.transcript"}, set()),
}


def step_classes() -> dict[str, type]:
    """Return every step class under bot/conversation/steps, by step name."""
    found = {}
    for info in pkgutil.iter_modules(steps_package.__path__):
        module = importlib.import_module(f"bot.conversation.steps.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and isinstance(getattr(value, "name", None), str):
                found[value.name] = value
    return found


def settle_writes(call: ast.Call) -> set[str]:
    """Return what a `turn.settle(reply, reason=..., status=...)` call writes."""
    written = {"answer.reply"}
    names = ["reply", "reason", "status"]
    for i, _ in enumerate(call.args[1:], start=1):
        written.add(f"answer.{names[i]}")
    written.update(f"answer.{k.arg}" for k in call.keywords if k.arg in ("reason", "status"))
    return written


def accesses(source: str) -> tuple[set[str], set[str], list[str]]:
    """Return the fields a module's code reads and writes through `turn`, and its problems."""
    tree = ast.parse(source)
    reads: set[str] = set()
    writes: set[str] = set()
    problems: list[str] = []
    local = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    augmented = {id(node.target) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
    #: `turn.<record>` -> the `turn.<record>.<field>` around it
    fields = {id(node.value): node for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.id if isinstance(callee, ast.Name) else callee.attr if isinstance(callee, ast.Attribute) else ""
            passes_turn = any(isinstance(a, ast.Name) and a.id == "turn" for a in node.args)
            if passes_turn and name not in local:
                problems.append(f"line {node.lineno}: `turn` handed to {name}(), outside the step's module")
            if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "turn":
                if callee.attr == "settle":
                    writes.update(settle_writes(node))
                elif callee.attr in METHODS:
                    reads.update(METHODS[callee.attr][0])
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "turn"):
            continue
        if node.attr in CONTROL or node.attr == "settle" or node.attr in METHODS:
            continue
        if node.attr not in RECORDS:
            problems.append(f"line {node.lineno}: turn.{node.attr} is no record of Turn")
            continue
        parent = fields.get(id(node))
        if parent is None:
            problems.append(f"line {node.lineno}: turn.{node.attr} used whole; name its fields")
            continue
        field = f"{node.attr}.{parent.attr}"
        if field == "stored.memory":  # a property over the claim
            field = "stored.claim"
        if isinstance(parent.ctx, ast.Store):
            writes.add(field)
            if id(parent) in augmented:
                reads.add(field)
        else:
            reads.add(field)
    return reads, writes, problems


def late_reads(order: tuple[str, ...], declared: dict[str, tuple[set[str], set[str]]]) -> list[str]:
    """Return the reads of a field that only later steps write."""
    late = []
    for i, name in enumerate(order):
        for field in sorted(declared[name][0]):
            writers = [j for j, other in enumerate(order) if field in declared[other][1]]
            if writers and min(writers) > i:
                late.append(f"{name} reads {field}, first written by {order[min(writers)]}")
    return late


def test_every_step_in_the_order_has_its_own_module() -> None:
    classes = step_classes()
    assert set(classes) == set(ORDER)
    for name, cls in classes.items():
        assert cls.__module__ == f"bot.conversation.steps.{name.replace('-', '_')}"
    assert OPTIONAL <= set(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_a_steps_declarations_match_its_code(name: str) -> None:
    cls = step_classes()[name]
    source = (ROOT / (cls.__module__.replace(".", "/") + ".py")).read_text(encoding="utf-8")
    reads, writes, problems = accesses(source)
    assert problems == []
    assert (set(cls.reads), set(cls.writes)) == (reads, writes)


def test_no_step_reads_what_only_a_later_step_writes() -> None:
    classes = step_classes()
    declared = {name: (set(classes[name].reads), set(classes[name].writes)) for name in ORDER}
    assert late_reads(ORDER, declared) == []


def test_the_order_check_would_catch_a_step_moved_too_early() -> None:
    classes = step_classes()
    declared = {name: (set(classes[name].reads), set(classes[name].writes)) for name in ORDER}
    moved = tuple(n for n in ORDER if n != "task")
    moved = moved[: moved.index("claim") + 1] + ("task",) + moved[moved.index("claim") + 1:]  # before `command`
    assert "task reads heard.text, first written by command" in late_reads(moved, declared)
    too_early = ("claim", "model", *[n for n in ORDER if n not in ("claim", "model")])
    assert "model reads answer.prompt, first written by prompt" in late_reads(too_early, declared)


def test_the_code_check_would_catch_an_undeclared_field_and_a_hidden_reader() -> None:
    reads, writes, problems = accesses(
        "def f(turn):\n"
        "    turn.found.task = 1\n"
        "    x = turn.answer.prompt\n"
        "    turn.settle('a', status='b')\n"
        "    y = turn.found\n"
        "    helper(turn)\n"
    )
    assert reads == {"answer.prompt"} and writes == {"found.task", "answer.reply", "answer.status"}
    assert [re.sub(r"line \d+: ", "", p) for p in problems] == [
        "turn.found used whole; name its fields", "`turn` handed to helper(), outside the step's module"]
