/** Longest key (in UTF-8 bytes) accepted; longer keys are rejected rather than silently truncated. */
export const MAX_KEY_BYTES = 1_024;
