// The guided scenarios: each drives simulated clients through the real server. Their notes
// are in i18n.js (`note.<name>`).

import { sleep } from './dom.js';
import { watchLeader } from './election.js';
import { t } from './i18n.js';
import { changed } from './state.js';
import { writeStore } from './store.js';
import { log } from './timeline.js';
import { acquire, begin, end, startHeartbeat } from './transactions.js';

export const scenarios = {
  deadlock2: {
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
  election: {
    async run(ns) {
      const watch = new AbortController();
      watchLeader(ns, 'leader', watch.signal);
      // Three instances campaign: the first leads, the others wait in line.
      const nodes = [await begin('node-a', 0, 3000), await begin('node-b', 0, 3000), await begin('node-c', 0, 3000)];
      for (const n of nodes) await acquire(n, ns, 'leader', 'EXCLUSIVE');
      await sleep(2000);
      // The leader crashes (its heartbeats stop): when its lease lapses the next one leads,
      // with a higher term.
      const [a, b, c] = nodes;
      a.heartbeat = false;
      startHeartbeat(a);
      log(t('log.leaderCrash', { name: a.name }));
      changed();
      for (let i = 0; i < 100 && a.state === 'ACTIVE'; i++) await sleep(100);
      await sleep(2000);
      // The new leader resigns: the last one takes over at once.
      log(t('log.resign', { name: b.name }));
      await end(b, true);
      await sleep(2500);
      watch.abort();
      await end(c, true);
    },
  },
  gcpause: {
    async run(ns) {
      const w1 = await begin('worker-1', 0, 2000);
      const r1 = await acquire(w1, ns, 'ledger', 'EXCLUSIVE');
      if (!r1 || r1.status !== 'granted') return;
      const stale = r1.fencing_token;
      writeStore(w1, stale);
      await sleep(500);
      w1.heartbeat = false;
      startHeartbeat(w1);
      log(t('log.stall'));
      changed();
      for (let i = 0; i < 100 && w1.state === 'ACTIVE'; i++) await sleep(100);
      const w2 = await begin('worker-2', 0, 15000);
      const r2 = await acquire(w2, ns, 'ledger', 'EXCLUSIVE');
      if (r2 && r2.status === 'granted') writeStore(w2, r2.fencing_token);
      await sleep(1000);
      log(t('log.wake'));
      writeStore(w1, stale);
    },
  },
};
