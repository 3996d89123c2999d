/**
 * ioredis ignores an option name it does not know. A slip in a `redis` (or Redlock node, or Sentinel address) options
 * object, `{ host: 'redis.internal', Port: 6380 }`, connected to the default instead (port 6379, localhost for a host):
 * maybe another Redis than the one every instance shares, so the instances did not exclude each other, and nothing
 * said so. A near miss of an ioredis option is refused now, naming the option meant; other unknown names still pass.
 * Refused before any connection: no Redis needed.
 */
import { join } from 'path';
import { DistributedLockModuleOptions, LockOptionsError, LockService } from '../../lib';
import { LockTestingController } from '../../lib/testing';
import { assertConnectionOption } from '../../lib/options/connection-option';
import { editDistance } from '../../lib/options/edit-distance';
import { IOREDIS_OPTION_KEYS } from '../../lib/options/ioredis-option-keys';
import { nearMissOf } from '../../lib/options/near-miss-keys';
import { typeCheckDiagnostics } from '../harness/type-check';

const three = ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379'];

/** The LockOptionsError building a LockService with `options` throws (before connecting), and the testing module's, which must match. */
function refusal(options: DistributedLockModuleOptions): LockOptionsError {
  let production: unknown;
  try {
    new LockService(options);
  } catch (error) {
    production = error;
  }
  expect(production).toBeInstanceOf(LockOptionsError);
  expect(() => new LockTestingController().createService(options)).toThrow((production as Error).message);
  return production as LockOptionsError;
}

describe('a near miss of an ioredis option name is refused', () => {
  it.each<[string, Record<string, unknown>, string, string]>([
    // Before: each was taken, and ioredis connected to the default port (or host) without a word.
    ['a name differing in case', { host: '10.0.0.1', Port: 6380 }, 'redis.Port', 'port'],
    ['two letters swapped', { host: '10.0.0.1', prot: 6380 }, 'redis.prot', 'port'],
    ['a letter left out', { host: '10.0.0.1', port: 6380, keyPrefx: 'app:' }, 'redis.keyPrefx', 'keyPrefix'],
    ['a password misspelt', { host: '10.0.0.1', port: 6380, pasword: 's3cret' }, 'redis.pasword', 'password'],
    ['a short name in capitals', { host: '10.0.0.1', port: 6380, DB: 2 }, 'redis.DB', 'db'],
    [
      'a Sentinel option',
      { sentinels: [{ host: '10.0.0.1', port: 26379 }], name: 'mymaster', sentinelPasword: 's' },
      'redis.sentinelPasword',
      'sentinelPassword',
    ],
    ['a Sentinel NAT map', { sentinels: [{ host: '10.0.0.1', port: 26379 }], name: 'mymaster', natmap: {} }, 'redis.natmap', 'natMap'],
    ['the port of a Sentinel', { sentinels: [{ host: '10.0.0.1', prot: 26380 }], name: 'mymaster' }, 'redis.sentinels[0].prot', 'port'],
    // Before: refused, but as "names only a port" / "names no server", which hid the slip.
    ['a host misspelt beside a port', { hots: '10.0.0.1', port: 6380 }, 'redis.hots', 'host'],
    ['both misspelt', { hots: '10.0.0.1', prot: 6380 }, 'redis.hots', 'host'],
  ])('%s', (_case, redis, option, meant) => {
    const error = refusal({ redis });
    expect(error.option).toBe(option);
    expect(error.message).toContain(`Did you mean '${meant}'? Rename it, or remove it.`);
    expect(error.message).toContain('ioredis ignores a name it does not know');
  });

  it('says what the default it would keep means for a host or port', () => {
    expect(refusal({ redis: { host: '10.0.0.1', Port: 6380 } as never }).message).toBe(
      `Invalid option "redis.Port": is not an ioredis option: ioredis ignores a name it does not know, so 'port' would keep its ` +
        `default without a word (6379: maybe another Redis than the one every instance shares, and then they would not exclude ` +
        `each other). Did you mean 'port'? Rename it, or remove it.`,
    );
  });

  it('in a Redlock node too', () => {
    const error = refusal({ nodes: [three[0], three[1], { host: '10.0.0.3', Port: 6380 } as never] });
    expect(error.option).toBe('nodes[2].Port');
  });

  it('passes the names ioredis reads, and other unknown names (a later ioredis may read them)', () => {
    const accepted = [
      { host: '10.0.0.1', port: 6380, db: 2, password: 's', keyPrefix: 'app:', tls: {}, lazyConnect: true },
      { host: '10.0.0.1', port: 6380, description: 'orders', applicationTag: 'x' },
      // Short names: only a difference of case counts (two edits are most of a two-letter name).
      { host: '10.0.0.1', port: 6380, id: 1, dbx: 1 },
      { sentinels: [{ host: '10.0.0.1', port: 26379, family: 4 }], name: 'mymaster', role: 'master', sentinelPassword: 's' },
    ];
    for (const redis of accepted) expect(() => assertConnectionOption('redis', redis)).not.toThrow();
  });
});

describe('a name in ioredis options that belongs elsewhere is refused, saying where it belongs', () => {
  // Before: each was taken and ignored by ioredis (the module kept its default, the password was not sent), or refused
  // as a near miss of an unrelated name ('ttl': did you mean 'tls'?; 'auth': did you mean 'path'?).
  it.each<[string, Record<string, unknown>, string]>([
    ['ttl', { host: '10.0.0.1', port: 6380, ttl: 60_000 }, 'redis.ttl'],
    ['waitTimeout', { host: '10.0.0.1', port: 6380, waitTimeout: 100 }, 'redis.waitTimeout'],
    ['shutdownTimeout', { sentinels: [{ host: '10.0.0.1', port: 26379 }], name: 'mymaster', shutdownTimeout: 1 }, 'redis.shutdownTimeout'],
  ])("the lock module's %s", (key, redis, option) => {
    const error = refusal({ redis });
    expect(error.option).toBe(option);
    expect(error.message).toBe(
      `Invalid option "${option}": is an option of the lock module, not of ioredis: ioredis ignores it, so the module's ${key} keeps its default. ` +
        `Move it out of redis into the module's options: DistributedLockModule.forRoot({ redis: …, ${key} }).`,
    );
  });

  it("the lock module's option in a Redlock node", () => {
    const error = refusal({ nodes: [three[0], { host: '10.0.0.2', port: 6379, ttl: 5_000 } as never, three[2]] });
    expect(error.option).toBe('nodes[1].ttl');
    expect(error.message).toContain("Move it out of nodes[1] into the module's options: DistributedLockModule.forRoot({ nodes: …, ttl }).");
  });

  it.each<[string, string]>([
    ['auth', "'password' (and 'username' for an ACL user)"],
    ['pass', "'password'"],
    ['user', "'username'"],
    ['database', "'db'"],
    ['ssl', "'tls'"],
    ['url', "the URL as the redis option itself: redis: 'redis://…'"],
  ])("another client's name: %s", (key, use) => {
    const error = refusal({ redis: { host: '10.0.0.1', port: 6380, [key]: 'x' } });
    expect(error.option).toBe(`redis.${key}`);
    expect(error.message).toContain("is not an ioredis option (another client's name): ioredis ignores it, so the setting is lost.");
    expect(error.message).toContain(`Use ${use}`);
  });

  it('leaves the names ioredis reads itself alone, also where the module has an option of that name', () => {
    expect(() =>
      assertConnectionOption('redis', { host: '10.0.0.1', port: 6380, keyPrefix: 'app:', commandTimeout: 500, username: 'u' }),
    ).not.toThrow();
  });
});

describe('near misses', () => {
  it('counts a swap of two adjacent characters as one edit', () => {
    expect(editDistance('prot', 'port')).toBe(1);
    expect(editDistance('keyPrefx', 'keyPrefix')).toBe(1);
    expect(editDistance('sentinal', 'sentinels')).toBe(2);
    expect(editDistance('port', 'port')).toBe(0);
    // Past the limit the answer is only "more": limit + 1.
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('a', 'abcdef')).toBe(3);
  });

  it('is within two edits, or a difference of case, and only case below three characters', () => {
    expect(nearMissOf('Port', IOREDIS_OPTION_KEYS)).toBe('port');
    expect(nearMissOf('hsot', IOREDIS_OPTION_KEYS)).toBe('host');
    expect(nearMissOf('DB', IOREDIS_OPTION_KEYS)).toBe('db');
    expect(nearMissOf('Db', IOREDIS_OPTION_KEYS)).toBe('db');
    expect(nearMissOf('d', IOREDIS_OPTION_KEYS)).toBeUndefined();
    expect(nearMissOf('dbx', IOREDIS_OPTION_KEYS)).toBeUndefined();
    expect(nearMissOf('description', IOREDIS_OPTION_KEYS)).toBeUndefined();
  });
});

describe('the list of ioredis option names', () => {
  it("is the installed ioredis's RedisOptions (test/types/ioredis-option-keys.check.ts type-checks)", () => {
    expect(typeCheckDiagnostics(join(__dirname, '..', 'types', 'ioredis-option-keys.check.ts'))).toEqual([]);
  }, 120_000);
});
