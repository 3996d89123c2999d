/** Longest key (in UTF-8 bytes) accepted; longer keys are rejected rather than silently truncated. */
export const MAX_KEY_BYTES = 1_024;

/**
 * Most keys one lock may be asked to take. Each key is one Redis round trip while the lock is taken (keys are
 * taken one by one, in canonical order), so a lock over an unbounded list, such as ids a client sends, held
 * Redis and the caller for seconds (15,000 keys overran a 2 s `waitTimeout` by 1.4 s). Counted on the list as
 * given, before duplicates are dropped or any key is read, so a list of ten million entries is refused without
 * being walked; 1,000 is far more than a lock over distinct resources needs (a transfer takes two accounts).
 */
export const MAX_KEYS_PER_LOCK = 1_000;
