"""API keys kept by the cluster through the SDK (``create_api_key``, ``list_api_keys``,
``revoke_api_key``) against a real dls with a keys file: a created key is usable, and
once revoked its calls are Unauthenticated."""

from __future__ import annotations

import uuid

import pytest

from caerus import ApiKeyInfo, DlsClient, Unauthenticated, sync
from conftest import eventually


async def test_a_created_key_works_until_it_is_revoked(auth_server):
    admin = DlsClient(endpoints=[auth_server.endpoint], api_key=auth_server.keys["admin"])
    name = f"py-{uuid.uuid4().hex[:8]}"
    secret = await admin.create_api_key(name, namespace_prefixes=["py-"])
    assert secret.startswith("dls_")
    listed = [k for k in await admin.list_api_keys() if k.name == name]
    assert len(listed) == 1 and isinstance(listed[0], ApiKeyInfo)
    assert (listed[0].namespace_prefixes, listed[0].created_by) == (["py-"], "admin")

    user = DlsClient(endpoints=[auth_server.endpoint], api_key=secret)
    txn = await user.begin_transaction(timeout_ms=10000)
    await txn.acquire_lock("py-ns", "k")
    await txn.commit()

    await admin.revoke_api_key(name)

    async def refused():
        try:
            await user.begin_transaction(timeout_ms=10000)
        except Unauthenticated:
            return True
        return None

    await eventually("the revoked key is refused", refused)
    # The blocking client has the same calls.
    blocking = sync.DlsClient(endpoints=[auth_server.endpoint], api_key=auth_server.keys["admin"])
    assert all(k.name != name for k in blocking.list_api_keys())
    with pytest.raises(Unauthenticated):
        sync.DlsClient(endpoints=[auth_server.endpoint], api_key=secret).begin_transaction(timeout_ms=1000)
