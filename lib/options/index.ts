export * from './lock-defaults';
export * from './resolve-options';
