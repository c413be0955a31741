"""TLS through the SDK against a real dls whose ports serve TLS and require a client
certificate; the certificates are made by `dls certs` when the suite starts."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from caerus import ConfigError, DlsClient, LockMode, Unavailable, sync

from conftest import make_certs


def ns() -> str:
    return f"py-tls-{uuid.uuid4().hex[:12]}"


async def test_async_client_with_the_ca_and_a_client_certificate(tls_server, certs):
    client = DlsClient(
        endpoints=[f"https://{tls_server.endpoint}"],
        ca_file=certs.ca,
        client_cert_file=certs.client_cert,
        client_key_file=certs.client_key,
    )
    async with client.transaction(timeout_ms=15000) as tx:
        lock = await tx.acquire_lock(ns(), "k", LockMode.EXCLUSIVE, timeout_ms=5000)
        assert lock.fencing_token > 0
    assert (await client.transaction_status(tx.id)).state == "COMMITTED"


def test_sync_client_takes_paths_and_a_bare_endpoint_means_https(tls_server, certs):
    client = sync.DlsClient(
        endpoints=[tls_server.endpoint],
        ca_file=Path(certs.ca),
        client_cert_file=Path(certs.client_cert),
        client_key_file=Path(certs.client_key),
    )
    with client.transaction() as tx:
        assert tx.acquire_lock(ns(), "k", timeout_ms=5000).fencing_token > 0
    assert client.transaction_status(tx.id).state == "COMMITTED"


def test_tls_files_from_the_environment(tls_server, certs, monkeypatch):
    monkeypatch.setenv("DLS_CA_FILE", certs.ca)
    monkeypatch.setenv("DLS_CLIENT_CERT_FILE", certs.client_cert)
    monkeypatch.setenv("DLS_CLIENT_KEY_FILE", certs.client_key)
    client = sync.DlsClient(endpoints=[tls_server.endpoint])
    with client.transaction() as tx:
        tx.acquire_lock(ns(), "k", timeout_ms=5000)


def quick(endpoint: str, **tls) -> sync.DlsClient:
    return sync.DlsClient(endpoints=[endpoint], retry_deadline_ms=2000, request_timeout_ms=1000, **tls)


def test_refused_without_a_client_certificate_with_another_ca_or_in_plain_text(tls_server, certs):
    with pytest.raises(Unavailable) as e:
        quick(tls_server.endpoint, ca_file=certs.ca).begin_transaction()
    assert "DLS_CLIENT_CERT_FILE" in e.value.message, "the error says what to give"

    other = make_certs()
    with pytest.raises(Unavailable) as e:
        quick(
            tls_server.endpoint,
            ca_file=other.ca,
            client_cert_file=certs.client_cert,
            client_key_file=certs.client_key,
        ).begin_transaction()
    assert "not signed by a CA this client trusts" in e.value.message

    with pytest.raises(Unavailable) as e:
        quick(f"http://{tls_server.endpoint}").begin_transaction()
    assert "https://" in e.value.message


def test_bad_tls_options_are_config_errors(tls_server, certs):
    with pytest.raises(ConfigError) as e:
        sync.DlsClient(endpoints=[tls_server.endpoint], client_cert_file=certs.client_cert)
    assert "without its key" in e.value.message
    with pytest.raises(ConfigError) as e:
        DlsClient(endpoints=[tls_server.endpoint], ca_file=certs.path("missing-ca.pem"))
    assert "missing-ca.pem" in e.value.message
