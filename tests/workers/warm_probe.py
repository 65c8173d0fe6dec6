"""A job for tests/workers/test_warm.py: what its work horse found already loaded."""

from __future__ import annotations

import gc
import sys


def loaded() -> dict[str, bool]:
    """Return whether the openai SDK was in this work horse before the job ran, and whether
    what the worker loaded is out of the collector's sight (frozen before the fork)."""
    return {"openai": "openai" in sys.modules, "frozen": gc.get_freeze_count() > 0}
