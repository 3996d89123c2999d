export * from './key-template';
export * from './key-value';
export * from './resolve-key-template';
export * from './key-source';
export * from './lock-key';
export * from './lone-surrogate';
