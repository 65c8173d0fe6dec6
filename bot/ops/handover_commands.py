"""`python -m bot handover`: take a conversation over for a person, or hand it back."""

from __future__ import annotations

import argparse
from typing import Any, Callable


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the handover command to the CLI's subparsers."""
