/**
 * Only `undefined` means "not given". A module option set to null (a config value that is missing:
 * `config.get('LOCK_COMMAND_TIMEOUT') ?? null`, `~` in YAML) was read as the default without a word,
 * while a per-call null, and a module-wide ttl: null, were refused: the caller believed a value was
 * set that was not. Refused now, by the production and the testing module alike, naming the option.
 */
import 'reflect-metadata';
import Redis from 'ioredis';
import { LockOptionsError, LockService } from '../../lib';
import { LockTestingController } from '../../lib/testing';
import { resolveHealthOptions } from '../../lib/terminus/lock-health-check';

const three = ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379'];

describe('an option set to null is refused, not read as its default', () => {
  // Production needs a redis option to reach the option under test; this client never connects.
  const lazy = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  afterAll(() => lazy.disconnect());

  it.each([
    'keyPrefix',
    'commandTimeout',
    'waiterLease',
    'shutdownTimeout',
    'replicaAcks',
    'replicaAckTimeout',
    'requireRedisAtStartup',
    'startupTimeout',
    'httpErrors',
  ])('module option %s: null', (option) => {
    const production = () => new LockService({ redis: lazy, [option]: null });
    expect(production).toThrow(LockOptionsError);
    expect(production).toThrow(new RegExp(`^Invalid option "${option}": expected .*, got null\\.`));
    expect(() => new LockTestingController().createService({ [option]: null })).toThrow(LockOptionsError);
  });

  it('nodeRecoveryDelay: null (Redlock)', () => {
    expect(() => new LockService({ nodes: three, nodeRecoveryDelay: null as never })).toThrow(
      /^Invalid option "nodeRecoveryDelay": expected .*, got null\./,
    );
    expect(() => new LockTestingController().createService({ nodes: three, nodeRecoveryDelay: null as never })).toThrow(LockOptionsError);
  });

  it.each(['maxRoundTrip', 'renewalErrorWindow'])('isHealthy option %s: null', (option) => {
    expect(() => resolveHealthOptions('lock', { [option]: null }, 2_000)).toThrow(
      new RegExp(`^Invalid option "${option}": expected .*, got null\\.`),
    );
  });
});
