"""A job for tests/workers/test_warm.py: what its work horse found already loaded."""

from __future__ import annotations

import sys


def loaded() -> dict[str, bool]:
    """Return whether the openai SDK was in this work horse before the job ran."""
    return {"openai": "openai" in sys.modules}
