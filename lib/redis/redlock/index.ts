export { RedlockBackend } from './redlock-backend';
export { nodeMarkerKey } from './redlock-store';
export { redlockNodeTimeout } from './redlock-options';
