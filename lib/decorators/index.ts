export * from './locked.decorator';
export * from './locked.constants';
export * from './locked-options.interface';
export * from './lock-http-errors.interceptor';
