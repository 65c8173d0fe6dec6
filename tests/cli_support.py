"""Run `whatsapp-bot` the way a test needs it (docs/testing.md).

Most CLI tests are about what a command does, not about the process it runs in: they call
`bot.ops.cli.main(argv)` in the test's own process, with the environment, working directory
and standard streams the command would have had in a subprocess, and get the same
CompletedProcess back. A few tests stay true subprocesses, where the process is the point
(start-up time, what a command imports, signals, `make run`'s CLI).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import structlog

from bot.observability import logs


def run_cli(args: list[str] | tuple[str, ...], env: dict[str, str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run `whatsapp-bot *args` in this process, as if in a subprocess with this environment
    (the whole of it), working directory and standard input; return what it would have."""
    from bot.ops.cli import main

    saved_env, saved_cwd, saved_stdin = dict(os.environ), Path.cwd(), sys.stdin
    saved_logging, saved_configured = structlog.get_config(), logs._configured
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors, a command's own exit
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if exit_.code is not None and not isinstance(exit_.code, int):
                    print(exit_.code, file=sys.stderr)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        structlog.configure(**saved_logging)
        logs._configured = saved_configured
    return subprocess.CompletedProcess(["whatsapp-bot", *args], int(code or 0), out.getvalue(), err.getvalue())
