"""The README's Python quick start as a program. The block inside main() is the README's,
as written; python.sh points its endpoint at the test's server. `charge` is the user's
business function: here it records the token it was given to $BILLING_RECORD."""

import asyncio
import os

from caerus import DlsClient, LockMode


async def charge(fencing_token: int) -> None:
    with open(os.environ["BILLING_RECORD"], "w") as f:
        f.write(f"{type(fencing_token).__name__} {fencing_token}\n")


async def main() -> None:
    client = DlsClient(endpoints=["127.0.0.1:7070"])          # api_key defaults to $CAERUS_API_KEY
    async with client.transaction(timeout_ms=15000) as tx:    # commit on normal exit, abort on exception
        lock = await tx.acquire_lock("billing-jobs", "monthly-billing-job", LockMode.EXCLUSIVE, timeout_ms=10000)
        await charge(fencing_token=lock.fencing_token)
    print("Lock acquired. Fencing token:", lock.fencing_token)


asyncio.run(main())
