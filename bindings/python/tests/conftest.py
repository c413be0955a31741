"""Fixtures: real `dls` servers (path from $DLS_BIN) on free ports with temporary data
directories, killed at the end. Nothing is mocked."""

from __future__ import annotations

import os
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


def free_ports(n: int) -> List[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
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


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch):
    for name in ("CAERUS_API_KEY", "DLS_CA_FILE", "DLS_CLIENT_CERT_FILE", "DLS_CLIENT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
