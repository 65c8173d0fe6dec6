"""Measure how long `whatsapp-bot` takes to start and finish a command, as an operator runs it:
`--help`, `users` and `inspect +E164` against a private embedded Redis holding one user, and
`chat` with no bot running (it says how to start one). Each is a new process, as at a shell.

Prints p50 and p90 over the runs; asserts nothing.

    .venv/bin/python bench/bench_cli.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.dev.embedded import start_embedded_redis  # noqa: E402

CLI = str(Path(sys.executable).parent / "whatsapp-bot")
USER = "+14155550100"


def timed(args: list[str], env: dict[str, str], cwd: str) -> float:
    """Run one command to its end; return its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run([CLI, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        redis = start_embedded_redis(Path(tmp) / "bench.db")
        try:
            env = {"PATH": os.environ["PATH"], "REDIS_URL": redis.url}
            subprocess.run([CLI, "facts", USER, "set", "city", "Porto"], env=env, cwd=tmp, capture_output=True, check=True)
            commands = {"--help": ["--help"], "users": ["users"], "inspect": ["inspect", USER],
                        "chat (no bot)": ["chat"]}
            print(f"whatsapp-bot, {args.runs} runs each, a new process each time (seconds):")
            for name, argv in commands.items():
                timed(argv, env, tmp)  # the first run warms the page cache
                samples = sorted(timed(argv, env, tmp) for _ in range(args.runs))
                p90 = samples[min(len(samples) - 1, int(0.9 * len(samples)))]
                print(f"  {name:<14} p50 {statistics.median(samples):.2f}  p90 {p90:.2f}")
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
