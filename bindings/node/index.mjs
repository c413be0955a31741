// ES module entry of @caerus-dev/sdk: the same objects as the CommonJS entry (index.js),
// so `import` and `require` in one process share classes (instanceof works across both).
import sdk from './index.js';

export const {
  Dls,
  DlsClient,
  jsonReplacer,
  KeyWatch,
  Election,
  Leadership,
  Transaction,
  EventWatch,
  DlsError,
  LockTimeoutError,
  DeadlockVictimError,
  TransactionLostError,
  TransactionNotFoundError,
  InvalidArgumentError,
  UnauthenticatedError,
  PermissionDeniedError,
  WaitCancelledError,
  AlreadyWaitingError,
  CursorExpiredError,
  ResourceExhaustedError,
  UnavailableError,
  ConfigError,
  InternalError,
} = sdk;
export default sdk;
