/** Real Redis for every suite: the global setup makes sure redis-server exists; suites start their own. */
const soak = process.env.SOAK === '1';
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
    // ESM-only dependencies (jest's CommonJS runtime cannot load them on this Node): see the transform.
    '/node_modules/@nestjs/terminus/.+\\.js$': '<rootDir>/test/harness/esm-package-transform.js',
  },
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/terminus/)'],
  // The library's warnings (a lease lost on purpose, Redis stopped on purpose) are expected in the
  // fault suites; only errors are printed.
  setupFiles: ['<rootDir>/test/harness/quiet-logs.ts'],
  testTimeout: soak ? 30 * 60_000 : 60_000,
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  reporters: ['default', '<rootDir>/test/harness/summary-reporter.js'],
};
