"""Every process of the bot runs numpy's BLAS on one thread unless the operator says
otherwise (bot/__init__.py; docs/semantic.md, Speed): read from OpenBLAS itself, in a fresh
interpreter that imports the bot the way gunicorn and the workers do."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import ctypes, glob, os
import {entry}
import numpy
found = glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "libscipy_openblas*"))
print(ctypes.CDLL(found[0]).scipy_openblas_get_num_threads64_() if found else "none")
"""


def blas_threads(entry: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", PROBE.format(entry=entry)], env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("entry", ["bot", "workers.worker"])
def test_one_blas_thread_unless_the_operator_sets_it(entry: str) -> None:
    threads = blas_threads(entry)
    if threads == "none":
        pytest.skip("numpy without its bundled OpenBLAS")
    assert threads == "1"
    assert blas_threads(entry, OPENBLAS_NUM_THREADS="2") == "2"
