/**
 * @internal What one health round trip to the store found (`LockStore.probe`): how long it took, or
 * why lock calls would fail now.
 */
export type StoreProbe = { ms: number } | { error: Error };
