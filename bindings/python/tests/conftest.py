"""Fixtures: real `dls` servers (path from $DLS_BIN) on free ports with temporary data
directories, killed at the end. Nothing is mocked."""

from __future__ import annotations

import os
import socket
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


def start_server(extra: Optional[List[str]] = None, directory: Optional[str] = None) -> Server:
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
            with urllib.request.urlopen(f"http://{server.http}/readyz", timeout=1) as r:
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


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch):
    monkeypatch.delenv("CAERUS_API_KEY", raising=False)
