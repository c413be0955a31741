"""Fixtures: real `dls` servers (path from $DLS_BIN), started by the test kit's
`dls-cluster` ($KIT_BIN) on ports the nodes bind themselves, in temporary data
directories, killed at the end. Nothing is mocked."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest


def _binary(var: str) -> str:
    path = os.environ.get(var)
    if not path or not os.path.exists(path):
        pytest.exit(f"{var} must point to the {var[:-4].lower()} binary (got {path!r}); run `make test-python`", returncode=2)
    return path


def dls_bin() -> str:
    return _binary("DLS_BIN")


class KitCluster:
    """Nodes run by `dls-cluster --control`: it starts them, waits until every node serves,
    prints their addresses, and answers one command per line (``leader``, ``kill ID``,
    ``start ID``, ...). Its nodes die with it, and it exits when our end of its stdin closes."""

    def __init__(self, nodes: int = 1, extra: Optional[List[str]] = None, tls_dir: Optional[str] = None,
                 probe_key: Optional[str] = None, directory: Optional[str] = None):
        args = [_binary("KIT_BIN"), "--dls", dls_bin(), "--nodes", str(nodes), "--fast-elections", "--control"]
        args += ["--tls", tls_dir] if tls_dir else []
        args += ["--probe-key", probe_key] if probe_key else []
        args += ["--dir", directory] if directory else []
        self.proc = subprocess.Popen([*args, "--", *(extra or [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.env: Dict[str, str] = {}
        while "DLS_DIR" not in self.env:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"dls-cluster exited ({self.proc.wait()}) before its cluster served; see its stderr")
            name, _, value = line.strip().partition("=")
            self.env[name] = value
        self.endpoints = self.env["DLS_ENDPOINTS"].split(",")
        self.http = self.env["DLS_HTTP"].split(",")

    def command(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"dls-cluster {line!r}: {answer or 'exited'}")
        return answer[3:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Server:
    """Node ``id`` of a kit cluster."""

    endpoint: str
    http: str
    kit: KitCluster
    id: int = 1
    keys: dict = field(default_factory=dict)

    def stop(self) -> None:
        """Kills this node; the last of its cluster takes ``dls-cluster`` with it."""
        if len(self.kit.endpoints) == 1:
            self.kit.stop()
        else:
            self.kit.command(f"kill {self.id}")


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



def make_certs(directory: Optional[str] = None) -> Certs:
    directory = directory or tempfile.mkdtemp(prefix="caerus-py-certs-")
    for args in (["init"], ["node", "1", "--host", "127.0.0.1", "--host", "localhost"], ["client", "app"]):
        subprocess.run([dls_bin(), "certs", *args, "--dir", directory], check=True, capture_output=True)
    return Certs(directory)


def start_server(
    extra: Optional[List[str]] = None, directory: Optional[str] = None, certs: Optional[Certs] = None,
    probe_key: Optional[str] = None,
) -> Server:
    """A single node, serving once this returns; with ``certs``, its client port serves TLS
    with node 1's certificate and requires a client certificate of the CA."""
    kit = KitCluster(1, extra, tls_dir=certs.dir if certs else None, probe_key=probe_key, directory=directory)
    return Server(kit.endpoints[0], kit.http[0], kit)


@dataclass
class ThreeNodes:
    """A three-node cluster: ``servers[i]`` is node i+1; ``leader()`` asks ``dls-cluster``."""

    kit: KitCluster

    @property
    def servers(self) -> List[Server]:
        return [Server(e, h, self.kit, i + 1) for i, (e, h) in enumerate(zip(self.kit.endpoints, self.kit.http))]

    @property
    def endpoints(self) -> List[str]:
        return self.kit.endpoints

    def leader(self) -> Server:
        return self.servers[int(self.kit.command("leader")) - 1]

    def stop(self) -> None:
        self.kit.stop()


def start_three_nodes() -> ThreeNodes:
    """Three real nodes authenticated to each other with a cluster secret, fast elections;
    returns once every node serves."""
    return ThreeNodes(KitCluster(3))


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
    s = start_server(["--api-keys-file", keys_file], directory, probe_key=keys["admin"])
    s.keys = keys
    yield s
    s.stop()


@pytest.fixture(scope="session")
def certs():
    return make_certs()


@pytest.fixture(scope="session")
def tls_server(certs):
    """A node whose client and HTTP ports serve TLS and require a client certificate."""
    s = start_server(certs=certs)
    yield s
    s.stop()


@dataclass
class Postgres:
    """A throwaway PostgreSQL server (see the ``postgres`` fixture), reached by its Unix
    socket in ``dir``: no TCP port to pick."""

    bin: str
    dir: str

    @property
    def conninfo(self) -> str:
        return f"host={self.dir} user=postgres dbname=postgres"

    def connect(self, **kwargs):
        import psycopg  # a test dependency (bindings/python/Makefile installs it)

        return psycopg.connect(self.conninfo, **kwargs)


def _as_postgres(cmd: List[str]) -> List[str]:
    # PostgreSQL refuses to run as root; CI is root, so the server runs as `postgres`.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres() -> Postgres:
    """Debian's PostgreSQL (package ``postgresql``, from ``make deps``): a fresh cluster in a
    temporary directory, trust authentication, a Unix socket in that directory. Missing
    binaries fail the test, never skip it."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    bin_dir = os.environ.get("PG_BIN") or (os.path.dirname(found[-1]) if found else None)
    if not bin_dir or not os.path.exists(os.path.join(bin_dir, "initdb")):
        pytest.fail(f"PostgreSQL server binaries not found (no initdb in {bin_dir or '/usr/lib/postgresql/*/bin'}): run `make deps`")
    directory = tempfile.mkdtemp(prefix="caerus-py-pg-")
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    data, log = os.path.join(directory, "data"), os.path.join(directory, "server.log")
    for cmd in (
        [os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-N"],
        [os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", "-o",
         f"-k {directory} -c listen_addresses='' -c fsync=off", "start"],
    ):
        done = subprocess.run(_as_postgres(cmd), capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"{cmd[0]} failed: {done.stdout}{done.stderr}")
    return Postgres(bin_dir, directory)


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
