"""`python -m bot operators`: the console's named operator accounts."""

from __future__ import annotations

import argparse
from typing import Any, Callable


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the operators command to the CLI's subparsers."""
