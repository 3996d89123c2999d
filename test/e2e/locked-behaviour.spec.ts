/**
 * What @Locked does beyond "take the lock": lock context, reentrancy, fail-fast that never swallows
 * a nested failure, refusing to run without the module, one LockService per application, Observable
 * subscriptions held under the lock, and every defect reported at decoration/bootstrap.
 */
import 'reflect-metadata';
import { Injectable, INestApplicationContext, Module, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Observable, Subject, defer, firstValueFrom, lastValueFrom, map, of, take, takeUntil, timer, toArray } from 'rxjs';
import {
  DistributedLockError,
  DistributedLockModule,
  LOCKED_METADATA,
  Locked,
  LockBusyError,
  LockKeyError,
  LockOptionsError,
  LockService,
  currentLock,
} from '../../lib';
import { commandStats } from '../harness/command-stats';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { sleep } from './locked-helpers';

const calls: string[] = [];

@Injectable()
class Inner {
  @Locked('hot', { onBusy: 'throw' })
  async hot() {
    return 'hot';
  }
}

@Injectable()
class Outer {
  constructor(private readonly inner: Inner) {}

  @Locked('outer:<0>', { onBusy: 'fail-fast', fallback: 'outer-busy' })
  async callsHot(_id: string) {
    return this.inner.hot();
  }

  @Locked('job:<0>', {
    onBusy: 'fail-fast',
    fallback(this: Outer, id: string) {
      return `skipped ${id} on ${this.constructor.name}`;
    },
  })
  async job(id: string, ms: number) {
    calls.push(`job:${id}`);
    await sleep(ms);
    return `ran ${id}`;
  }

  @Locked('key:<0>')
  async badValue(_v: unknown) {
    calls.push('badValue');
  }
}

@Injectable()
class Streams {
  subscriptions = 0;

  @Locked('stream:<0>', { onBusy: 'throw' })
  ticks(id: string, count: number): Observable<string> {
    return defer(() => {
      this.subscriptions++;
      return timer(0, 40).pipe(
        take(count),
        map((i) => `${id}:${i}:${currentLock()?.key}`),
      );
    });
  }

  @Locked('stream:<0>', { onBusy: 'fail-fast', fallback: 'busy' })
  once(id: string): Observable<string> {
    return of(`once ${id}`);
  }

  @Locked('stream:<0>', { onBusy: 'fail-fast' })
  quiet(id: string): Observable<string> {
    return of(`quiet ${id}`);
  }

  @Locked('stream:<0>')
  async untyped(id: string): Promise<unknown> {
    return of(id);
  }
}

async function appWith(redisUrl: string | undefined, providers: Provider[], keyPrefix?: string): Promise<INestApplicationContext> {
  @Module({
    imports: redisUrl ? [DistributedLockModule.forRoot({ redis: redisUrl, keyPrefix })] : [],
    providers,
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  moduleRef.useLogger(false);
  return moduleRef.init();
}

describe('@Locked behaviour', () => {
  let redis: SharedRedis;
  let app: INestApplicationContext;
  let probe: ReturnType<SharedRedis['client']>;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    probe = redis.client();
    app = await appWith(redis.url, [Inner, Outer, Streams]);
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  beforeEach(() => (calls.length = 0));

  /** Lua script calls Redis has served (every lock operation is one). */
  async function scriptCalls(): Promise<number> {
    const stats = await commandStats(probe);
    return Object.entries(stats).reduce((sum, [name, calls]) => (/^(eval|evalsha|fcall)/.test(name) ? sum + calls : sum), 0);
  }

  describe('lock context and nesting', () => {
    it("an outer fail-fast does not swallow a nested lock's LockBusyError", async () => {
      const locks = app.get(LockService);
      const held = await locks.acquire('hot');
      try {
        await expect(app.get(Outer).callsHot('1')).rejects.toBeInstanceOf(LockBusyError);
      } finally {
        await held.release();
      }
      await expect(app.get(Outer).callsHot('1')).resolves.toBe('hot');
    });
  });

  describe('values refused at call time, before any Redis command', () => {
    it.each<[string, unknown, RegExp]>([
      ['undefined', undefined, /<0> resolved to undefined/],
      ['null', null, /<0> resolved to null/],
      ['object', { id: 1 }, /<0> resolved to an object/],
      ['empty string', '', /<0> resolved to an empty string/],
      ['NaN', NaN, /<0> resolved to NaN/],
    ])('%s: LockKeyError, the method does not run, Redis is not asked', async (_name, value, message) => {
      const before = await scriptCalls();
      await expect(app.get(Outer).badValue(value)).rejects.toThrow(LockKeyError);
      await expect(app.get(Outer).badValue(value)).rejects.toThrow(message);
      expect(calls).toEqual([]);
      expect(await scriptCalls()).toBe(before);
      await app.get(Outer).badValue('ok');
      expect(await scriptCalls()).toBeGreaterThan(before); // the probe does see a real lock's scripts
    });
  });

  describe('Observables', () => {
    it('holds the lock for the whole subscription: busy while subscribed, free right after complete', async () => {
      const streams = app.get(Streams);
      const stream = streams.ticks('s1', 4);
      await sleep(50);
      expect(streams.subscriptions).toBe(0); // creating the Observable takes no lock and runs nothing
      expect(await app.get(LockService).isLocked('stream:s1')).toBe(false);
      const values = lastValueFrom(stream.pipe(toArray()));
      await sleep(60);
      expect(await app.get(LockService).isLocked('stream:s1')).toBe(true);
      await expect(firstValueFrom(streams.ticks('s1', 1))).rejects.toBeInstanceOf(LockBusyError);
      await expect(firstValueFrom(streams.once('s1'))).resolves.toBe('busy');
      await expect(lastValueFrom(streams.quiet('s1').pipe(toArray()))).resolves.toEqual([]);
      await expect(values).resolves.toEqual(['s1:0:stream:s1', 's1:1:stream:s1', 's1:2:stream:s1', 's1:3:stream:s1']);
      expect(await app.get(LockService).isLocked('stream:s1')).toBe(false);
      await expect(firstValueFrom(streams.once('s1'))).resolves.toBe('once s1');
    });

    it('releases when the subscriber unsubscribes', async () => {
      const streams = app.get(Streams);
      const stop = new Subject<void>();
      const seen: string[] = [];
      const sub = streams
        .ticks('s2', 1_000)
        .pipe(takeUntil(stop))
        .subscribe((v) => seen.push(v));
      await sleep(100);
      expect(await app.get(LockService).isLocked('stream:s2')).toBe(true);
      stop.next();
      sub.unsubscribe();
      const deadline = Date.now() + 1_000;
      while ((await app.get(LockService).isLocked('stream:s2')) && Date.now() < deadline) await sleep(10);
      expect(await app.get(LockService).isLocked('stream:s2')).toBe(false);
      expect(seen.length).toBeGreaterThan(0);
    });

    it('refuses an Observable returned by a method not declared to return one (its lock could not cover the subscription)', async () => {
      await expect(app.get(Streams).untyped('u')).rejects.toThrow(/returned an Observable, but its declared return type is not Observable/);
    });
  });

  describe('decoration-time and bootstrap errors', () => {
    it('bootstrap fails with a LockKeyError naming class, method and template for a placeholder beyond the parameters', async () => {
      const bootstrap = async () => {
        @Injectable()
        class BadTemplateService {
          @Locked('order:<0>:<1.id>')
          async place(orderId: string) {
            return orderId;
          }
        }
        return appWith(redis.url, [BadTemplateService]);
      };
      await expect(bootstrap()).rejects.toThrow(LockKeyError);
      await expect(bootstrap()).rejects.toThrow(
        /@Locked on BadTemplateService\.place: key template "order:<0>:<1\.id>" uses <1\.id>, but the method declares 1 parameter/,
      );
    });

    it.each<[string, () => unknown, new (...a: never[]) => Error, RegExp]>([
      [
        'async generator',
        () => {
          class G {
            // @ts-expect-error the types refuse a generator too (it returns no Promise)
            @Locked('g') async *items() {
              yield 1;
            }
          }
          return G;
        },
        DistributedLockError,
        /generator methods cannot be @Locked/,
      ],
      [
        'sync generator',
        () => {
          class G {
            // @ts-expect-error the types refuse a generator too (it returns no Promise)
            @Locked('g') *items() {
              yield 1;
            }
          }
          return G;
        },
        DistributedLockError,
        /generator methods cannot be @Locked/,
      ],
      [
        '@Locked twice',
        () => {
          class T {
            @Locked('a') @Locked('b') async m() {
              return 1;
            }
          }
          return T;
        },
        DistributedLockError,
        /@Locked is applied twice/,
      ],
      [
        'static method',
        () => {
          class S {
            @Locked('a') static async m() {
              return 1;
            }
          }
          return S;
        },
        DistributedLockError,
        /static methods cannot be @Locked/,
      ],
      [
        'synchronous method, types bypassed',
        () => {
          class O {
            // @ts-expect-error a method returning a number synchronously is a compile error
            @Locked('a') m(): number {
              return 1;
            }
          }
          return O;
        },
        DistributedLockError,
        /@Locked on O\.m: the method is declared to return Number, but @Locked makes every call asynchronous/,
      ],
      [
        'bad option',
        () => {
          class O {
            @Locked('a', { ttl: -1 }) async m() {
              return 1;
            }
          }
          return O;
        },
        LockOptionsError,
        /@Locked on O\.m options\.ttl/,
      ],
      [
        'bad policy',
        () => {
          class O {
            @Locked('a', { onBusy: 'wait' as 'retry' }) async m() {
              return 1;
            }
          }
          return O;
        },
        LockOptionsError,
        /onBusy/,
      ],
      [
        'syntax error',
        () => {
          class O {
            @Locked('a:<0') async m(_a: string) {
              return 1;
            }
          }
          return O;
        },
        LockKeyError,
        /@Locked on O\.m: syntax error in key template "a:<0"/,
      ],
      [
        'empty template',
        () => {
          class O {
            @Locked('') async m() {
              return 1;
            }
          }
          return O;
        },
        LockKeyError,
        /@Locked on O\.m: the key template is empty/,
      ],
    ])('%s is refused when the class is defined', (_name, define, type, message) => {
      expect(define).toThrow(type);
      expect(define).toThrow(message);
    });

    it('records keys and options as metadata', () => {
      expect(Reflect.getMetadata(LOCKED_METADATA, Outer.prototype.callsHot)).toEqual({
        keys: 'outer:<0>',
        options: { onBusy: 'fail-fast', fallback: 'outer-busy' },
      });
    });
  });

  describe('without the module', () => {
    it('fails with an error that says to import DistributedLockModule, and never runs the method unlocked', async () => {
      const bare = await appWith(undefined, [Inner, Outer]);
      try {
        await expect(bare.get(Outer).job('1', 0)).rejects.toThrow(DistributedLockError);
        await expect(bare.get(Outer).job('1', 0)).rejects.toThrow(/Import DistributedLockModule\.forRoot/);
        expect(calls).toEqual([]);
      } finally {
        await bare.close();
      }
    });

    it('fails the same way for an instance created with new, or a method called without its instance', async () => {
      await expect(new Outer(new Inner()).job('1', 0)).rejects.toThrow(/no LockService is attached to its instance/);
      const detached = app.get(Outer).job;
      await expect(detached('1', 0)).rejects.toThrow(/called without its instance/);
      expect(calls).toEqual([]);
    });
  });

  describe('two applications in one process', () => {
    it('fail-fast against one Redis: exactly one of two concurrent calls runs', async () => {
      const other = await appWith(redis.url, [Inner, Outer]);
      try {
        for (let round = 0; round < 5; round++) {
          calls.length = 0;
          const results = await Promise.all([app.get(Outer).job(`r${round}`, 100), other.get(Outer).job(`r${round}`, 100)]);
          expect(calls).toEqual([`job:r${round}`]);
          expect(results.filter((r) => r.startsWith('ran'))).toHaveLength(1);
          expect(results.filter((r) => r.startsWith('skipped'))).toHaveLength(1);
        }
      } finally {
        await other.close();
      }
    });

    it('each uses its own LockService (its own keyPrefix), not a process-wide one', async () => {
      const other = await appWith(redis.url, [Inner, Outer], 'other:');
      try {
        const held = await app.get(LockService).acquire('job:p');
        try {
          // Same class, same key, but the other app's LockService writes under another prefix: not busy there.
          await expect(other.get(Outer).job('p', 0)).resolves.toBe('ran p');
          await expect(app.get(Outer).job('p', 0)).resolves.toBe('skipped p on Outer');
        } finally {
          await held.release();
        }
        const heldThere = await other.get(LockService).acquire('job:q');
        try {
          await expect(other.get(Outer).job('q', 0)).resolves.toBe('skipped q on Outer');
          await expect(app.get(Outer).job('q', 0)).resolves.toBe('ran q');
        } finally {
          await heldThere.release();
        }
      } finally {
        await other.close();
      }
    });
  });
});
