"""Errors that point at the fix: a wait ends at the caller's timeout when the cluster does
not answer, and a client aimed at the HTTP port is told to use the gRPC port."""

from __future__ import annotations

import time

import pytest

import caerus
from caerus import DlsClient, LockMode
from conftest import start_server


@pytest.fixture(scope="module")
def down_endpoint():
    """The gRPC address of a node that was killed: connections are refused."""
    server = start_server()
    server.stop()
    return server.endpoint


async def test_a_lock_with_a_2s_timeout_gives_up_in_time_on_a_down_node(down_endpoint):
    client = DlsClient(endpoints=[down_endpoint])
    started = time.monotonic()
    with pytest.raises(caerus.Unavailable) as e:
        async with client.lock("jobs", "nightly", LockMode.EXCLUSIVE, timeout_ms=2000):
            pass
    took = time.monotonic() - started
    print(f"lock(timeout_ms=2000) against a down node gave up after {took:.2f} s")
    assert "got no answer" in str(e.value)
    # The requirement is the timeout + 1 s; the slack is for a loaded machine.
    assert took < 2 + 3, took


async def test_a_client_aimed_at_the_http_port_is_told_the_grpc_port(server):
    client = DlsClient(endpoints=[server.http])
    with pytest.raises(caerus.ConfigError) as e:
        await client.begin_transaction()
    assert "HTTP port" in str(e.value) and "gRPC port" in str(e.value), str(e.value)
