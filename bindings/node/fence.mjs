// ES module entry of @caerus-dev/sdk/fence: the same objects as the CommonJS one (fence.js).
import fence from './fence.js';

export const { MAX_TOKEN, FenceError, StaleTokenError, install, checkAndAdvance, lastToken, fencedWrite, adapters, pg, sqlJs } =
  fence;
export default fence;
