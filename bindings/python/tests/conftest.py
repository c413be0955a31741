"""Fixtures: real `dls` servers (path from $DLS_BIN) on free ports with temporary data
directories, killed at the end. Nothing is mocked."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import List, Optional

import pytest


def dls_bin() -> str:
    path = os.environ.get("DLS_BIN")
    if not path or not os.path.exists(path):
        pytest.exit(f"DLS_BIN must point to the dls binary (got {path!r}); run `make test-python`", returncode=2)
    return path


# Test ports come from below Linux's ephemeral range (32768-60999), where outgoing
# connections take their local ports and could take a picked port before the server binds
# it; a port is handed out at most once per test process (as the Rust test kit does).
PORT_RANGE = range(20000, 32768)
_handed_out: set = set()


def free_ports(n: int) -> List[int]:
    """`n` distinct ports that were free a moment ago, none handed out before here."""
    held = []
    try:
        for _ in range(len(PORT_RANGE) * 4):
            if len(held) == n:
                break
            port = random.choice(PORT_RANGE)
            if port in _handed_out:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            _handed_out.add(port)
            held.append(s)
        assert len(held) == n, f"no {n} free loopback ports left in {PORT_RANGE}"
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


@dataclass
class Server:
    endpoint: str
    http: str
    proc: subprocess.Popen
    dir: str
    keys: dict = field(default_factory=dict)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Certs:
    """A cluster CA, node 1's certificate (127.0.0.1, localhost) and a client certificate
    ``client-app``, made by ``dls certs`` in ``dir``."""

    dir: str

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    @property
    def client_cert(self) -> str:
        return self.path("client-app.pem")

    @property
    def client_key(self) -> str:
        return self.path("client-app-key.pem")

    def serve_flags(self, require_client_cert: bool) -> List[str]:
        flags = ["--tls-cert", self.path("node-1.pem"), "--tls-key", self.path("node-1-key.pem")]
        return flags + (["--tls-client-ca", self.ca] if require_client_cert else [])

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def make_certs(directory: Optional[str] = None) -> Certs:
    directory = directory or tempfile.mkdtemp(prefix="caerus-py-certs-")
    for args in (["init"], ["node", "1", "--host", "127.0.0.1", "--host", "localhost"], ["client", "app"]):
        subprocess.run([dls_bin(), "certs", *args, "--dir", directory], check=True, capture_output=True)
    return Certs(directory)


def start_server(
    extra: Optional[List[str]] = None, directory: Optional[str] = None, certs: Optional[Certs] = None
) -> Server:
    """A single node; with ``certs``, its ports serve TLS (``extra`` adds the TLS flags) and
    the readiness probe speaks https with the CA and the client certificate."""
    directory = directory or tempfile.mkdtemp(prefix="caerus-py-")
    port, http_port = free_ports(2)
    log = open(os.path.join(directory, "dls.log"), "ab")
    proc = subprocess.Popen(
        [
            dls_bin(), "serve",
            "--listen", f"127.0.0.1:{port}",
            "--http-listen", f"127.0.0.1:{http_port}",
            "--data-dir", os.path.join(directory, "data"),
            "--heartbeat-ms", "50", "--election-timeout-ms", "300",
            *(extra or []),
        ],
        stdout=log, stderr=log, env={**os.environ, "DLS_LOG": "info"},
    )
    server = Server(f"127.0.0.1:{port}", f"127.0.0.1:{http_port}", proc, directory)
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"dls exited with {proc.returncode}; log in {directory}/dls.log")
        try:
            scheme, context = ("https", certs.ssl_context()) if certs else ("http", None)
            with urllib.request.urlopen(f"{scheme}://{server.http}/readyz", timeout=1, context=context) as r:
                if r.status == 200:
                    return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"dls not ready within 30 s; log in {directory}/dls.log")
        time.sleep(0.1)


@dataclass
class ThreeNodes:
    """A three-node cluster: ``servers[i]`` is node i+1; ``leader()`` asks the nodes."""

    servers: List[Server]

    @property
    def endpoints(self) -> List[str]:
        return [s.endpoint for s in self.servers]

    def leader(self) -> Server:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for s in self.servers:
                try:
                    with urllib.request.urlopen(f"http://{s.http}/api/v1/cluster", timeout=1) as r:
                        body = json.loads(r.read())
                        if body.get("leader_id") == body.get("node_id"):
                            return s
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError("no leader within 30 s")

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


def start_three_nodes() -> ThreeNodes:
    """Three real nodes on free ports (client, peer and HTTP port each), authenticated to
    each other with a cluster secret, fast elections; returns once a leader is elected."""
    ports = free_ports(9)
    peers = ",".join(f"{i + 1}=127.0.0.1:{ports[3 * i]}/127.0.0.1:{ports[3 * i + 1]}" for i in range(3))
    secret = f"py-secret-{os.urandom(16).hex()}"
    servers = []
    for i in range(3):
        directory = tempfile.mkdtemp(prefix=f"caerus-py-node{i + 1}-")
        log = open(os.path.join(directory, "dls.log"), "ab")
        proc = subprocess.Popen(
            [
                dls_bin(), "serve", "--node-id", str(i + 1), "--peers", peers,
                "--http-listen", f"127.0.0.1:{ports[3 * i + 2]}",
                "--data-dir", os.path.join(directory, "data"),
                "--heartbeat-ms", "50", "--election-timeout-ms", "300",
            ],
            stdout=log, stderr=log, env={**os.environ, "DLS_LOG": "info", "DLS_CLUSTER_SECRET": secret},
        )
        servers.append(Server(f"127.0.0.1:{ports[3 * i]}", f"127.0.0.1:{ports[3 * i + 2]}", proc, directory))
    cluster = ThreeNodes(servers)
    try:
        cluster.leader()
    except Exception:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def three_nodes():
    c = start_three_nodes()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def server():
    s = start_server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def limited_server():
    """A server with a deliberately small limit: one active transaction."""
    s = start_server(["--max-txns-per-api-key", "1"])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def auth_server():
    directory = tempfile.mkdtemp(prefix="caerus-py-auth-")
    keys_file = os.path.join(directory, "keys.toml")
    keys = {}
    for name, args in (("admin", ["--admin"]), ("billing", ["--namespace", "billing"])):
        out = subprocess.run(
            [dls_bin(), "keys", "add", "--file", keys_file, "--name", name, *args],
            check=True, capture_output=True, text=True,
        ).stdout
        # The key is the one long token printed on stdout.
        keys[name] = max(out.split(), key=len)
    s = start_server(["--api-keys-file", keys_file], directory)
    s.keys = keys
    yield s
    s.stop()


@pytest.fixture(scope="session")
def certs():
    return make_certs()


@pytest.fixture(scope="session")
def tls_server(certs):
    """A node whose client and HTTP ports serve TLS and require a client certificate."""
    s = start_server(certs.serve_flags(require_client_cert=True), certs=certs)
    yield s
    s.stop()


@dataclass
class Postgres:
    """A throwaway PostgreSQL server (see the ``postgres`` fixture)."""

    port: int
    bin: str
    dir: str

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def connect(self, **kwargs):
        import psycopg  # a test dependency (bindings/python/Makefile installs it)

        return psycopg.connect(self.conninfo, **kwargs)


def _as_postgres(cmd: List[str]) -> List[str]:
    # PostgreSQL refuses to run as root; CI is root, so the server runs as `postgres`.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres() -> Postgres:
    """Debian's PostgreSQL (package ``postgresql``, from ``make deps``): a fresh cluster in a
    temporary directory, trust authentication on 127.0.0.1 and a free port. Missing
    binaries fail the test, never skip it."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    bin_dir = os.environ.get("PG_BIN") or (os.path.dirname(found[-1]) if found else None)
    if not bin_dir or not os.path.exists(os.path.join(bin_dir, "initdb")):
        pytest.fail(f"PostgreSQL server binaries not found (no initdb in {bin_dir or '/usr/lib/postgresql/*/bin'}): run `make deps`")
    directory = tempfile.mkdtemp(prefix="caerus-py-pg-")
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    data, log = os.path.join(directory, "data"), os.path.join(directory, "server.log")
    (port,) = free_ports(1)
    for cmd in (
        [os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-N"],
        [os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", "-o",
         f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
    ):
        done = subprocess.run(_as_postgres(cmd), capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"{cmd[0]} failed: {done.stdout}{done.stderr}")
    return Postgres(port, bin_dir, directory)


def stop_postgres(pg: Postgres) -> None:
    cmd = [os.path.join(pg.bin, "pg_ctl"), "-D", os.path.join(pg.dir, "data"), "-m", "immediate", "-w", "stop"]
    subprocess.run(_as_postgres(cmd), capture_output=True)
    shutil.rmtree(pg.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    pg = start_postgres()
    yield pg
    stop_postgres(pg)


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch):
    for name in ("CAERUS_API_KEY", "DLS_CA_FILE", "DLS_CLIENT_CERT_FILE", "DLS_CLIENT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


async def eventually(what: str, probe, timeout_s: float = 30.0):
    """Polls ``probe`` (async) until it returns something true, which it returns; fails naming
    ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.05)


async def waits_in_line(client, namespace: str, key: str, name: str, task=None) -> bool:
    """True once the transaction named ``name`` is listed waiting for ``namespace``/``key``
    (``list_locks``, an operator call), or once ``task`` (its acquire) has finished: an
    acquire granted when it should have waited then fails the caller's next assertion at
    once instead of timing out here."""
    if task is not None and task.done():
        return True
    for k in await client.list_locks(namespace):
        if (k.namespace, k.key) == (namespace, key):
            return any(w["transaction_name"] == name for w in k.waiters)
    return False
