"""The processes a test run or `make run` starts, found again by an environment tag.

Every process we start inherits ``BOT_PROCESS_TAG`` (a fresh id per run), however deep in
the tree and even once orphaned, so the run can check at its end that none is left and stop
those that are. On Linux a direct child can also be told to die with its parent, and a
process can watch whether its parent was told to stop (watch_parent: `make run` under make).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Callable

import psutil

TAG_VAR = "BOT_PROCESS_TAG"
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def ensure_tag() -> str:
    """Return this run's tag, setting it in os.environ (so every child inherits it)."""
    if TAG_VAR not in os.environ:
        os.environ[TAG_VAR] = uuid.uuid4().hex
    return os.environ[TAG_VAR]


def tagged_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Return `base` (default os.environ) with this run's tag."""
    return {**(os.environ if base is None else base), TAG_VAR: ensure_tag()}


def die_with_parent() -> None:
    """In a child between fork and exec: get SIGTERM when the thread that started us ends."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> None:
    """Stop a child we started: `sig`, then SIGKILL if it is still there after timeout_s."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Return the running processes carrying `tag`, except this one and its ancestors."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for process in psutil.process_iter():
        if process.pid in mine:
            continue
        try:
            if process.environ().get(TAG_VAR) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
            continue
    return found


def describe(process: psutil.Process) -> str:
    """Return 'pid command line' for a report."""
    try:
        return f"{process.pid} {' '.join(process.cmdline())[:120]}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return str(process.pid)


def stop_tagged(tag: str, timeout_s: float = 5.0) -> list[str]:
    """Stop every process carrying `tag` (SIGTERM, then SIGKILL); return what was running."""
    found = tagged_processes(tag)
    names = [describe(p) for p in found]
    for process in found:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(found, timeout=timeout_s)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=timeout_s)
    return names


def caught_signals(pid: int) -> int | None:
    """Return the mask of the signals a process catches (Linux's /proc), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def watch_parent(stop: Callable[[], None], stopping: threading.Event, poll_s: float = 0.5) -> None:
    """Call stop() once, from a thread, when our parent is told to stop or dies.

    GNU make catches SIGINT and SIGTERM while it runs a recipe. Told to stop by a SIGTERM it
    passes it on to us; by a SIGINT sent to make alone (not a terminal's Ctrl-C, which
    reaches the whole group) it tells nobody: it drops its handler and waits for its
    children, which heard nothing. We see the handler gone in /proc and stop, so make can
    end too. A parent that dies (SIGKILL) leaves us to init: our parent's PID changes."""
    parent = os.getppid()
    first = caught_signals(parent) or 0
    watched = sum(1 << (sig - 1) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) & first

    def watch() -> None:
        while not stopping.wait(poll_s):
            now = caught_signals(parent)
            if os.getppid() != parent or (watched and now is not None and watched & ~now):
                stop()
                return

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()
