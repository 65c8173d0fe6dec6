"""`make run` as a newcomer meets it: the runner (bot/dev/runner.py) in a subprocess, with
nothing configured, driven by the `chat` client over HTTP, then stopped by a signal."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from dotenv import dotenv_values

from bot.dev.embedded import free_port
from bot.dev.processes import TAG_VAR, tagged_processes
from bot.llm.fence import MEMORY_HEADER

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
USER = "+351912345678"
#: Settings a developer may have exported; a newcomer has none of them.
UNSET = ("REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TWILIO_AUTH_TOKEN", "PORT", "LOG_LEVEL",
         "PROMETHEUS_MULTIPROC_DIR", "EXTRACTION_INTERVAL")


def newcomer_env(tag: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update({TAG_VAR: tag, "PORT": str(free_port()), **extra})
    return env


def start_runner(cwd: Path, env: dict[str, str], **popen: object) -> subprocess.Popen[str]:
    shutil.copy(ROOT / "Procfile", cwd / "Procfile")
    return subprocess.Popen([sys.executable, "-m", "bot.dev.runner"], cwd=cwd, env=env, text=True,
                            stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]


def wait_until_up(cwd: Path, runner: subprocess.Popen[str] | None, timeout_s: float = 60) -> dict[str, str]:
    """Wait until the bot started in `cwd` answers /readyz; return its .run/dev.env."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if runner is not None:
            assert runner.poll() is None, runner.stderr.read() if runner.stderr else ""
        dev_env = cwd / ".run" / "dev.env"
        if dev_env.exists():
            shared = {k: v for k, v in dotenv_values(dev_env).items() if v is not None}
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{shared['PORT']}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return shared
            except OSError:
                pass
        time.sleep(0.2)
    raise AssertionError("make run did not come up")


def cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def stop(runner: subprocess.Popen[str], sig: int) -> str:
    runner.send_signal(sig)
    _, err = runner.communicate(timeout=60)
    return err


def sign_in_to_console(port: str, name: str, password: str) -> int:
    """Sign in to the console's form over HTTP, as a browser would; return where it led (status)."""
    jar = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with jar.open(f"http://127.0.0.1:{port}/console/signin", timeout=5) as r:
        token = re.search(r'name="csrf_token" value="([^"]+)"', r.read().decode())
    assert token is not None
    form = urllib.parse.urlencode({"csrf_token": token.group(1), "name": name, "password": password}).encode()
    with jar.open(f"http://127.0.0.1:{port}/console/signin", data=form, timeout=5) as r:
        return r.status if "/console/signin" not in r.url else 401


def test_make_run_remembers_with_the_stand_in_alone_and_stops_clean(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    # A newcomer's first step: .env copied from .env.example as it is (its empty values unset).
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    # Extraction waits for a pause: a short one.
    env = newcomer_env(tag, EXTRACTION_IDLE_S="2")
    runner = start_runner(tmp_path, env)
    try:
        shared = wait_until_up(tmp_path, runner)
        password = dotenv_values(tmp_path / ".run" / "console.env")["DEV_PASSWORD"]
        assert password and sign_in_to_console(shared["PORT"], "dev", password) == 200
        first = cli(tmp_path, "chat", "--user", USER, stdin="Hi! My name is Ana and I live in Porto.\n")
        assert first.returncode == 0 and "bot> " in first.stdout, first.stderr
        deadline = time.monotonic() + 20  # the worker extracts in the background
        facts: dict[str, str] = {}
        while time.monotonic() < deadline and not {"name", "city"} <= set(facts):
            listed = cli(tmp_path, "facts", USER, "--json")
            facts = {f["key"]: f["value"] for f in json.loads(listed.stdout or "{}").get("user", [])}
            time.sleep(0.3)
        assert facts.get("name") == "Ana" and facts.get("city") == "Porto", facts
        more = ["What should I eat for dinner tonight?", "Any idea for a walk this afternoon?",
                "Which museum would you pick for a rainy day?", "And a good book for the weekend?",
                "Plan my Saturday, please."]
        rest = cli(tmp_path, "chat", "--user", USER, stdin="\n".join(more) + "\n")
        assert rest.stdout.count("bot> ") >= 5, rest.stderr
        base = shared["OPENAI_BASE_URL"].removesuffix("/v1")
        with urllib.request.urlopen(f"{base}/_standin/requests", timeout=5) as r:
            requests = json.loads(r.read())["requests"]
        replies = [q for q in requests if "response_format" not in q and q["messages"][-1]["content"] in more]
        sixth = replies[-1]["messages"]
        assert sixth[-1]["content"] == more[-1]
        [block] = [m["content"] for m in sixth if m["role"] == "system" and MEMORY_HEADER in m["content"]]
        assert "Ana" in block and "Porto" in block
    finally:
        err = stop(runner, signal.SIGINT)
    assert runner.returncode == 0, err
    lines = err.rstrip().splitlines()
    assert lines[-1].startswith("make run: stopped web, worker, embed, stand-in and Redis")
    assert f"password {password}" in err  # the banner says how to sign in
    ready = next(i for i, line in enumerate(lines) if line.startswith("ready    webhook http://127.0.0.1:"))
    assert "console http://127.0.0.1:" in lines[ready] and "chat: .venv/bin/whatsapp-bot chat" in lines[ready + 1]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "SIGKILL" not in err
    assert tagged_processes(tag) == []
    assert not (tmp_path / ".run" / "dev.env").exists()

    # Right after, on the same port, under a pipe whose reader has gone: up, then SIGTERM.
    again = start_runner(tmp_path, env, stdout=subprocess.PIPE)
    try:
        wait_until_up(tmp_path, again)
        kept = json.loads(cli(tmp_path, "facts", USER, "--json").stdout or "{}").get("user", [])
        assert {f["key"]: f["value"] for f in kept}.get("name") == "Ana"  # the embedded Redis kept its data
        assert again.stdout is not None
        again.stdout.close()  # `| tee log` whose tee died
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(60)
    assert again.returncode == 0
    assert tagged_processes(tag) == []


def test_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    runner = start_runner(tmp_path, newcomer_env(tag, RECENT_PAIRS="abc"))
    err = runner.communicate(timeout=60)[1]
    assert runner.returncode == 2
    assert err.strip().count("\n") == 0 and "RECENT_PAIRS" in err and "Traceback" not in err
    assert tagged_processes(tag) == []


def test_a_redis_that_does_not_answer_is_named(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    runner = start_runner(tmp_path, newcomer_env(tag, REDIS_URL=f"redis://:secret@127.0.0.1:{free_port()}/0"))
    err = runner.communicate(timeout=60)[1]
    assert runner.returncode == 2
    assert err.strip().count("\n") == 0 and "REDIS_URL=redis://:***@127.0.0.1" in err
    assert "secret" not in err and "Traceback" not in err
    assert tagged_processes(tag) == []


def test_ctrl_c_in_a_terminal_ends_make_with_exit_0(tmp_path: Path) -> None:
    """At a terminal, Ctrl-C goes to the foreground process group. The runner makes that its
    own, so make is not interrupted ("make: *** Interrupt", exit 130) and exits 0 after it."""
    import pty
    import select

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    tag = uuid.uuid4().hex
    shutil.copy(ROOT / "Procfile", tmp_path / "Procfile")
    (tmp_path / "Makefile").write_text(f"run:\n\t{sys.executable} -m bot.dev.runner\n")
    env = newcomer_env(tag, WORKER_PROCESSES="2")  # what is under test is the terminal, not the workers
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal session running make, as a developer would
        os.chdir(tmp_path)
        os.execvpe("make", ["make", "-s", "run"], env)
    output = b""
    try:
        wait_until_up(tmp_path, None)
        os.write(fd, b"\x03")  # Ctrl-C, typed
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    output += os.read(fd, 65536)
                except OSError:
                    pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, output[-2000:]
    finally:
        os.close(fd)
    assert b"Interrupt" not in output and b"Bye." in output
    assert tagged_processes(tag) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_make_alone_stops_everything_and_keeps_the_data(tmp_path: Path, sig: int) -> None:
    """A process manager (or `kill`) signals make alone, not its process group: make passes a
    SIGTERM on, and drops its SIGINT handler without telling anyone; the runner sees either
    and stops every process it started, keeping the data."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    tag = uuid.uuid4().hex
    shutil.copy(ROOT / "Procfile", tmp_path / "Procfile")
    (tmp_path / "Makefile").write_text(f"run:\n\t{sys.executable} -m bot.dev.runner\n")
    make = subprocess.Popen(["make", "-s", "run"], cwd=tmp_path, env=newcomer_env(tag, WORKER_PROCESSES="2"),
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(tmp_path, None)
        make.send_signal(sig)
        make.wait(60)
        deadline = time.monotonic() + 30
        while tagged_processes(tag) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        if make.poll() is None:
            make.kill()
    assert tagged_processes(tag) == []
    assert (tmp_path / ".run" / "redis" / "dump.rdb").is_file()  # saved on the way out


def test_the_makefiles_run_recipe_leaves_make_the_runners_parent() -> None:
    """No shell between make and the runner (a redirection or a `;` would put one there), so
    the runner watches make itself (bot/dev/processes.py watch_parent)."""
    recipe = (ROOT / "Makefile").read_text().split("\nrun:")[1].split("\n\n")[0].splitlines()[1:]
    assert [line.strip() for line in recipe if line.strip()] == ["$(BIN)/python -m bot.dev.runner"]
