"""The evals that run on a private Redis of their own (`eval knowledge`, `eval memory`): one
way to load them from the development extra, print them and exit 1 below target."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.services import Services


def run_dev_eval(services: Services, args: argparse.Namespace, module: str, run: str, show: str) -> int:
    """Run bot/dev/<module>.py's `run` on the labelled set (--data, else the bundled one),
    print it with `show` (or as JSON); exit 0 when its targets are met, else 1."""
    try:
        evaluation = importlib.import_module(f"bot.dev.{module}")
    except ImportError as err:  # the development extra
        print(f"eval needs the development tools ({err.name} is missing): pip install -e '.[dev]'", file=sys.stderr)
        return 2
    report = getattr(evaluation, run)(services, Path(args.data) if args.data else None)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        getattr(evaluation, show)(report)
    return 0 if report["targets_met"] else 1
