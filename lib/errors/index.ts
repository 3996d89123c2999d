export * from './distributed-lock.error';
export * from './lock-busy.error';
export * from './lock-timeout.error';
export * from './lock-lost.error';
export * from './lock-key.error';
export * from './lock-connection.error';
export * from './lock-options.error';
export * from './lock-service-closed.error';
