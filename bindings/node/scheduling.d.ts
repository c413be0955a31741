// Types of @caerus-dev/sdk/scheduling: a job at most once per schedule slot (see scheduling.js).
import type { DlsClient, Dls } from './index';

/** A period: ms (a positive integer) or a string such as '500ms', '30s', '5m', '1h', '1d'. */
export type Period = number | string;

export interface OncePerSlotOptions {
  /** A later firing in the same slot may rerun a slot whose run failed or was lost (default false). */
  retryFailed?: boolean;
  /** The transaction's lease in ms, renewed while the job runs (default 15000). */
  leaseMs?: number;
  /** Labels the transaction in `dls locks` and the slot's record (default: the job's name). */
  name?: string;
  /** Called with one line when a firing skips (default console.info). */
  log?: (line: string) => void;
}

/** What the wrapped job resolves with when this firing did not run it. */
export class Skipped {
  readonly skipped: true;
  /** 'locked': another host holds the lock (it runs the slot); 'slot-done': the slot already ran. */
  readonly reason: 'locked' | 'slot-done';
  readonly slot: number | null;
  /** Who ran the slot and how it ended ('slot-done' only). */
  readonly lastRun: Dls.SlotRun | null;
}

/**
 * Wraps `job` so that it runs at most once per slot of `period` (decided by the cluster's clock),
 * whichever host fires it: `cron.schedule('*\/5 * * * *', oncePerSlot(dls, 'jobs', 'sync', '5m', sync))`.
 * Resolves with the job's value, or a Skipped; a job that throws records FAILED and rejects.
 */
export function oncePerSlot<A extends unknown[], R>(
  client: DlsClient | string | string[],
  namespace: string,
  key: string,
  period: Period,
  job: (...args: A) => R | Promise<R>,
  options?: OncePerSlotOptions,
): (...args: A) => Promise<R | Skipped>;

/** Inside a wrapped job: the claim it runs under (`slot`, `attempt`); null elsewhere. */
export function currentClaim(): Dls.SlotClaim | null;

/** A period as ms; throws RangeError or TypeError for a bad one. */
export function periodMs(period: Period): number;
