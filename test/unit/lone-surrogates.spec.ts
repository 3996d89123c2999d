/**
 * Redis stores key text as UTF-8, and a lone UTF-16 surrogate has no UTF-8 form: Node writes it as
 * U+FFFD. So `user:\ud800` and `user:\udfff` are one Redis key, and the second caller was told
 * "busy" by a lock that is not its own. Ill-formed keys are refused before any Redis command.
 */
import { LockKeyError, LockOptionsError, LockService, lockKey } from '../../lib';
import { commandCalls, redisSuite } from './core-helpers';

const HIGH = 'user:\ud800';
const LOW = 'user:\udfff';

describe('keys with lone UTF-16 surrogates', () => {
  const suite = redisSuite();

  const scriptCalls = async () => (await commandCalls(suite.client, 'eval')) + (await commandCalls(suite.client, 'evalsha'));

  it('are one key to Redis (why they must be refused)', async () => {
    await suite.client.set(`surrogate-demo:${HIGH}`, 'high', 'PX', 10_000);
    expect(await suite.client.get(`surrogate-demo:${LOW}`)).toBe('high');
  });

  it('two keys differing only in a lone surrogate are refused, never merged into one lock; nothing reaches Redis', async () => {
    const locks = await suite.pool.make();
    const before = await scriptCalls();
    const first = await locks.acquire(HIGH).catch((e: unknown) => e);
    const second = await locks.acquire(LOW, { onBusy: 'throw' }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(LockKeyError);
    expect(second).toBeInstanceOf(LockKeyError);
    expect((first as Error).message).toMatch(/Lock key "user:\\ud800" contains a lone UTF-16 surrogate \(\\ud800 at index 5\)/);
    expect((first as Error).message).toMatch(/U\+FFFD/);
    expect((first as Error).message).toMatch(/well-formed/);
    await expect(locks.tryAcquire(['a', LOW])).rejects.toBeInstanceOf(LockKeyError);
    await expect(locks.withLock(LOW, () => 1)).rejects.toBeInstanceOf(LockKeyError);
    await expect(locks.isLocked(LOW)).rejects.toBeInstanceOf(LockKeyError);
    expect(await scriptCalls()).toBe(before);
    expect(await suite.client.keys('test:*')).toEqual([]);

    // Well-formed text, surrogate pairs included, is taken as it is.
    const lock = await locks.acquire('user:🔒');
    expect(await suite.client.get('test:{user:🔒}')).toBe(lock.token);
    await lock.release();
  });

  it('are refused in template values and template text, naming the placeholder', () => {
    expect(() => lockKey('user:<0>', HIGH.slice(5))).toThrow(LockKeyError);
    expect(() => lockKey('user:<0>', HIGH.slice(5))).toThrow(
      /placeholder <0> resolved to a string with a lone UTF-16 surrogate \(\\ud800 at index 0\)/,
    );
    expect(() => lockKey('user:<0.name>', { name: `x${LOW.slice(5)}` })).toThrow(/<0.name> .*\\udfff at index 1/);
    expect(() => lockKey(`${HIGH}:<0>`, 1)).toThrow(/key template "user:\\ud800:<0>" contains a lone UTF-16 surrogate/);
    expect(lockKey('user:<0>', '🔒')).toBe('user:🔒');
  });

  it('are refused in keyPrefix when the service is made', () => {
    const make = () => void new LockService({ redis: suite.redis.url, keyPrefix: `app\udbff:` }).close(); // closed if it was made
    expect(make).toThrow(LockOptionsError);
    expect(make).toThrow(/"keyPrefix": "app\\udbff:" contains a lone UTF-16 surrogate/);
  });
});
