// The brief's example (dls-worker.ts) as an ES module, as written. procesarFacturacion is
// the user's business function: here it records the token it got to $BILLING_RECORD.
// The endpoint comes from $DLS_ENDPOINTS, the key from $CAERUS_API_KEY (node.sh sets both).
import { writeFileSync } from 'node:fs';
import { Dls } from '@caerus-dev/sdk';

async function procesarFacturacion({ fencingToken }: { fencingToken: bigint }): Promise<void> {
  writeFileSync(process.env.BILLING_RECORD!, `${typeof fencingToken} ${fencingToken}\n`);
}

const dls = new Dls.DlsClient({
  apiKey: process.env.CAERUS_API_KEY!,
});

// withTransaction orquesta la transacción, heartbeat automático y liberación en finally
await dls.withTransaction(async (tx) => {
  // Adquirir lock exclusivo con Fencing Token
  const lock = await tx.acquireLock(
    'billing-jobs',
    'monthly-billing-job',
    'EXCLUSIVE',
    { timeoutMs: 10000 }
  );

  console.log('Lock adquirido. Fencing Token:', lock.fencingToken);

  // Ejecutar tarea crítica pasando el fencing token
  await procesarFacturacion({
    fencingToken: lock.fencingToken,
  });
}, { timeoutMs: 15000 });
