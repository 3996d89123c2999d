export { RedlockBackend } from './redlock-backend';
export { nodeMarkerKey } from './redlock-store';
export { redlockNodeTimeout } from '../../options/redlock-options';
