export * from './lock-options.interface';
export * from './distributed-lock-module-options.interface';
export * from './lock-handle.interface';
export * from './defer-options.interface';
