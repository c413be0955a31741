// The guided scenarios: each drives simulated clients through the real server.

import { sleep } from './dom.js';
import { changed } from './state.js';
import { writeStore } from './store.js';
import { log } from './timeline.js';
import { acquire, begin, end, startHeartbeat } from './transactions.js';

export const scenarios = {
  deadlock2: {
    note: 'alice (priority 5) holds a, bob (priority 1) holds b; each then asks for the other\'s key. The server finds the cycle and aborts the lowest priority; alice proceeds and commits.',
    async run(ns) {
      const a = await begin('alice', 5, 15000);
      const b = await begin('bob', 1, 15000);
      await acquire(a, ns, 'a', 'EXCLUSIVE');
      await acquire(b, ns, 'b', 'EXCLUSIVE');
      a.commitWhenGranted = true;
      b.commitWhenGranted = true;
      await acquire(a, ns, 'b', 'EXCLUSIVE');
      await sleep(800);
      await acquire(b, ns, 'a', 'EXCLUSIVE');
    },
  },
  deadlock3: {
    note: 'alice → bob → carol → alice, over keys a, b, c. carol has the lowest priority and is the victim; the other two finish one after the other.',
    async run(ns) {
      const ts = [await begin('alice', 3, 15000), await begin('bob', 2, 15000), await begin('carol', 1, 15000)];
      const keys = ['a', 'b', 'c'];
      for (let i = 0; i < 3; i++) await acquire(ts[i], ns, keys[i], 'EXCLUSIVE');
      for (let i = 0; i < 3; i++) {
        ts[i].commitWhenGranted = true;
        await sleep(800);
        await acquire(ts[i], ns, keys[(i + 1) % 3], 'EXCLUSIVE');
      }
    },
  },
  fairness: {
    note: 'reader-1 reads; writer queues; reader-2 arrives and queues BEHIND the writer (FIFO: readers cannot starve a writer) although it could share with reader-1. reader-1 commits, the writer goes, then reader-2.',
    async run(ns) {
      const r1 = await begin('reader-1', 0, 15000);
      const w = await begin('writer', 0, 15000);
      const r2 = await begin('reader-2', 0, 15000);
      await acquire(r1, ns, 'doc', 'SHARED_READ');
      await sleep(600);
      await acquire(w, ns, 'doc', 'EXCLUSIVE');
      await sleep(600);
      await acquire(r2, ns, 'doc', 'SHARED_READ');
      w.commitWhenGranted = true;
      r2.commitWhenGranted = true;
      await sleep(3000);
      await end(r1, true);
    },
  },
  gcpause: {
    note: 'worker-1 takes the lock and writes with its token. Then it "pauses" (heartbeats off) until its lease lapses; worker-2 gets the lock with a higher token and writes. worker-1 wakes and writes with its old token: the fenced store rejects it.',
    async run(ns) {
      const w1 = await begin('worker-1', 0, 2000);
      const r1 = await acquire(w1, ns, 'ledger', 'EXCLUSIVE');
      if (!r1 || r1.status !== 'granted') return;
      const stale = r1.fencing_token;
      writeStore(w1, stale);
      await sleep(500);
      w1.heartbeat = false;
      startHeartbeat(w1);
      log('worker-1 stalls (GC pause): heartbeats OFF');
      changed();
      for (let i = 0; i < 100 && w1.state === 'ACTIVE'; i++) await sleep(100);
      const w2 = await begin('worker-2', 0, 15000);
      const r2 = await acquire(w2, ns, 'ledger', 'EXCLUSIVE');
      if (r2 && r2.status === 'granted') writeStore(w2, r2.fencing_token);
      await sleep(1000);
      log('worker-1 wakes up and, still believing it holds the lock, writes with its old token');
      writeStore(w1, stale);
    },
  },
};
