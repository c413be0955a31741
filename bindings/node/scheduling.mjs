// ES module entry of @caerus-dev/sdk/scheduling: the same objects as the CommonJS one (scheduling.js).
import scheduling from './scheduling.js';

export const { oncePerSlot, currentClaim, periodMs, Skipped } = scheduling;
export default scheduling;
