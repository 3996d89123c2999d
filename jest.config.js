/** Real Redis for every suite: the global setup makes sure redis-server exists; suites start their own. */
const soak = process.env.SOAK === '1';
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true }] },
  testTimeout: soak ? 30 * 60_000 : 60_000,
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
};
