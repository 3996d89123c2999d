/**
 * Key templates: parsed once, checked against the declared parameters, resolved per call into
 * deterministic and injective keys, and refusing every value that would lock on a constant.
 */
import 'reflect-metadata';
import fc from 'fast-check';
import { ForbiddenException } from '@nestjs/common';
import { LockKeyError, LockOptionsError, Locked, lockKey } from '../../lib';
import { compileKeySource } from '../../lib/keys/key-source';
import { parsedTemplates } from '../../lib/keys/lock-key';
import { normalizeKeys } from '../../lib/keys/normalize-keys';
import { parseKeyTemplate } from '../../lib/keys/key-template';
import { resolveKeyTemplate } from '../../lib/keys/resolve-key-template';

const WHERE = '@Locked on Svc.method';
const resolve = (template: string, args: unknown[]) => resolveKeyTemplate(parseKeyTemplate(template, WHERE), args, WHERE);

describe('key template resolution', () => {
  it.each<[string, unknown[], string]>([
    ['jobs:settle', [], 'jobs:settle'],
    ['order:<0>', ['42'], 'order:42'],
    ['order:<0>', [42], 'order:42'],
    ['coupon:<0>:<1.userId>', ['c1', { userId: 7 }], 'coupon:c1:7'],
    ['item:<0.items.1.sku>', [{ items: [{ sku: 'a' }, { sku: 'b' }] }], 'item:b'],
    ['<0>:<0>', ['x'], 'x:x'],
    ['pre<0>:mid<1>post', ['a', 'b'], 'prea:midbpost'],
    ['n:<0>:<1>:<2>', [10n, true, -1.5], 'n:10:true:-1.5'],
    ['s:<0.length>', ['abcd'], 's:4'],
    ['x:<0>:<1>', ['a:b', 'c'], 'x:a%3Ab:c'],
    ['x:<0>:<1>', ['a', 'b:c'], 'x:a:b%3Ac'],
    ['x:<0>', ['100%'], 'x:100%25'],
    ['x:<0>', ['{tag}*?\n ü'], 'x:{tag}*?\n ü'],
  ])('%s with %p → %s', (template, args, key) => {
    expect(resolve(template, args)).toBe(key);
  });
});

describe('@Locked refuses a bad spec when the class is defined', () => {
  /** Defines a class whose one method is @Locked with `keys` and `options`. */
  const define = (keys: unknown, options?: unknown) => () => {
    class Svc {
      @Locked(keys as never, options as never)
      async method(_id: string): Promise<void> {}
    }
    return Svc;
  };

  it('a key spec that is not one (a number, null, an object, undefined) is a LockKeyError, not a TypeError', () => {
    for (const keys of [42, null, {}, undefined]) expect(define(keys)).toThrow(LockKeyError);
  });

  it('an option @Locked does not read (a typo) is a LockOptionsError naming the closest', () => {
    expect(define('a:<0>', { waitTimout: 1 })).toThrow(/waitTimout": is not an option; did you mean waitTimeout\?/);
    expect(define('a:<0>', { allowOuterWrapper: true, minHold: 700_000 })).not.toThrow(); // maxHold may come from the module
  });

  it("a fallback with an onBusy that never uses it ('retry', 'throw') is a LockOptionsError", () => {
    expect(define('a:<0>', { onBusy: 'retry', fallback: 'FB' })).toThrow(LockOptionsError);
    expect(define('a:<0>', { onBusy: 'throw', fallback: () => 'FB' })).toThrow(/only used with onBusy: 'fail-fast'/);
    expect(define('a:<0>', { onBusy: 'fail-fast', fallback: 'FB' })).not.toThrow();
  });
});

describe('template errors at decoration time (LockKeyError naming the method and template)', () => {
  it.each<[string, unknown, number, RegExp]>([
    ['empty template', '', 1, /empty/],
    ['not a string', 42, 1, /expected a key template, an array of templates or a function, got the number 42/],
    ['empty array', [], 1, /array of key templates is empty/],
    ['unclosed <', 'a:<0', 1, /syntax error.*"<" is not closed/],
    ['stray >', 'a:0>', 1, /syntax error.*unmatched ">"/],
    ['nested <', 'a:<<0>>', 1, /syntax error/],
    ['empty placeholder', 'a:<>', 1, /"<>" is not a placeholder/],
    ['non-numeric index', 'a:<id>', 1, /"<id>" is not a placeholder/],
    ['leading zero', 'a:<01>', 2, /"<01>" is not a placeholder/],
    ['empty path segment', 'a:<0..id>', 1, /"<0..id>" is not a placeholder/],
    ['trailing dot', 'a:<0.>', 1, /"<0.>" is not a placeholder/],
    ['adjacent placeholders', 'a:<0><1>', 2, /<0> and <1> must be separated by text containing ":"/],
    ['no separator between placeholders', 'a:<0>-<1>', 2, /must be separated/],
    ['undeclared argument', 'a:<2>', 2, /uses <2>, but the method declares 2 parameter/],
    ['undeclared argument in a path', 'a:<1.id>', 1, /uses <1.id>, but the method declares 1 parameter/],
    ['undeclared argument, second template', ['a:<0>', 'b:<3>'], 2, /"b:<3>" uses <3>/],
    // design:paramtypes counts a rest parameter as one: the message says what to do instead.
    ['past a rest parameter', 'a:<0>:<1>', 1, /a rest parameter counts as one: lock with a key function/],
  ])('%s', (_name, spec, declared, message) => {
    const compile = () => compileKeySource(spec as string, declared, WHERE);
    expect(compile).toThrow(LockKeyError);
    expect(compile).toThrow(message);
    expect(compile).toThrow(/@Locked on Svc\.method/);
  });
});

describe('value errors at call time (LockKeyError naming the placeholder and the type)', () => {
  const sym = Symbol('s');
  it.each<[string, string, unknown[], RegExp]>([
    ['undefined argument', 'seat:<0>', [undefined], /<0> resolved to undefined/],
    ['missing argument', 'seat:<1>', ['a'], /<1> resolved to undefined/],
    ['null', 'seat:<0>', [null], /<0> resolved to null/],
    ['empty string', 'seat:<0>', [''], /<0> resolved to an empty string/],
    ['NaN', 'seat:<0>', [NaN], /<0> resolved to NaN/],
    ['Infinity', 'seat:<0>', [Infinity], /<0> resolved to the number Infinity/],
    ['object', 'seat:<0>', [{ id: 1 }], /<0> resolved to an object \(Object\)/],
    ['array', 'seat:<0>', [[1, 2]], /<0> resolved to an array/],
    ['function', 'seat:<0>', [() => 1], /<0> resolved to a function/],
    ['symbol', 'seat:<0>', [sym], /<0> resolved to a symbol/],
    ['missing field', 'seat:<0.id>', [{}], /<0.id> resolved to undefined/],
    ['undefined on the path', 'seat:<0.a.b>', [{}], /<0.a.b> cannot be resolved: <0.a> is undefined/],
    ['null argument with a path', 'seat:<0.id>', [null], /<0.id> cannot be resolved: <0> is null/],
    ['Date object', 'seat:<0>', [new Date(0)], /an object \(Date\)/],
    // Was the getter's own Error, a 500 over HTTP.
    [
      'a getter on the path that throws',
      'seat:<0.user.id>',
      [
        {
          get user(): unknown {
            throw new TypeError('session expired');
          },
        },
      ],
      /<0.user.id> cannot be resolved: reading "user" of <0> threw TypeError: session expired/,
    ],
  ])('%s', (_name, template, args, message) => {
    const call = () => resolve(template, args);
    expect(call).toThrow(LockKeyError);
    expect(call).toThrow(message);
    expect(call).toThrow(/The method was not run/);
  });

  it("says when the argument was not passed: a default parameter's value is not seen by the template", () => {
    // m(id, scope = 'all') called as m('a'): the template reads undefined, and said only that.
    const notPassed =
      /\(the call passed 1 argument\(s\): a key template reads the arguments as passed, so a default parameter's value is not seen; pass the argument, or lock with a key function that applies the default\)/;
    expect(() => resolve('seat:<0>:<1>', ['a'])).toThrow(notPassed);
    expect(() => resolve('seat:<0>:<1>', ['a'])).toThrow(/^@Locked on Svc\.method: placeholder <1> resolved to undefined \(the call passed/);
    expect(() => resolve('seat:<0>:<1.id>', ['a'])).toThrow(notPassed);
    expect(() => resolve('seat:<0>:<1.id>', ['a'])).toThrow(/<1\.id> cannot be resolved: <1> is undefined \(the call passed/);
    // Passed as undefined, or missing further down the path: the note would mislead.
    expect(() => resolve('seat:<0>:<1>', ['a', undefined])).not.toThrow(/the call passed/);
    expect(() => resolve('seat:<0>:<1.a.b>', ['a', {}])).not.toThrow(/the call passed/);
    expect(() => resolve('seat:<0>:<1>', ['a', undefined])).toThrow(LockKeyError);
  });

  it('passes on an HTTP exception a getter on the path throws (its own answer, e.g. 403), as it is', () => {
    const forbidden = new ForbiddenException('not a member of any tenant');
    const caller = {
      get tenantId(): string {
        throw forbidden;
      },
    };
    expect(() => resolve('billing:<0.tenantId>', [caller])).toThrow(forbidden);
  });

  it('rejects (never hashes or truncates) a key over 1024 UTF-8 bytes, naming the template', () => {
    expect(resolve('k:<0>', ['x'.repeat(1022)])).toHaveLength(1024);
    expect(() => resolve('k:<0>', ['x'.repeat(1023)])).toThrow(/key template "k:<0>" resolved to a key of 1025 bytes.*limit is 1024/);
    // Multi-byte characters count by their UTF-8 size, and escaping counts too.
    expect(() => resolve('k:<0>', ['ü'.repeat(512)])).toThrow(LockKeyError);
    expect(() => resolve('k:<0>', [':'.repeat(341)])).toThrow(/1025 bytes/);
  });
});

describe('key functions and template arrays', () => {
  it('calls a key function with this and the arguments, and checks its result', () => {
    const self = { tenant: 't1' };
    const source = compileKeySource(
      function (this: typeof self, id: string) {
        return `order:${this.tenant}:${id}`;
      },
      0,
      WHERE,
    );
    expect(source.resolve(self, ['9'])).toEqual(['order:t1:9']);
    const bad = (result: unknown) => compileKeySource(() => result as string, 0, WHERE).resolve(undefined, []);
    expect(() => bad(undefined)).toThrow(/key function returned undefined/);
    expect(() => bad('')).toThrow(/key function returned an empty string/);
    expect(() => bad([])).toThrow(/returned an empty array/);
    expect(() => bad(['a', 3])).toThrow(/returned the number 3/);
    expect(bad(['a', 'b'])).toEqual(['a', 'b']);
  });

  // Checked only by the engine before, after the call's keys were resolved: a route handler's key function
  // fed an over-long id answered a logged 500 where its template answered 400 (locked-http-key-function.spec.ts).
  it.each<[string, string]>([
    ['1,025 ASCII bytes', 'k'.repeat(1_025)],
    ['1,026 UTF-8 bytes in 342 characters', '\u20ac'.repeat(342)],
    ['a lone high surrogate', 'user:\ud800'],
    ['a lone low surrogate', 'user:\udfff'],
  ])("a key function's key that normalizeKeys refuses (%s) is refused as the call's keys are resolved, naming the method", (_what, key) => {
    expect(() => normalizeKeys(key)).toThrow(LockKeyError);
    const source = compileKeySource(() => ['ok', key], 0, WHERE);
    expect(() => source.resolve(undefined, [])).toThrow(LockKeyError);
    expect(() => source.resolve(undefined, [])).toThrow(/^@Locked on Svc\.method: the key function returned the key ".*The method was not run\.$/s);
  });

  it("a key function's key at the limits normalizeKeys accepts (1,024 bytes, a valid surrogate pair) is accepted", () => {
    for (const key of ['k'.repeat(1_024), '\u20ac'.repeat(341) + 'k', 'user:\ud83d\ude00']) {
      expect(normalizeKeys(key)).toEqual([key]);
      expect(compileKeySource(() => key, 0, WHERE).resolve(undefined, [])).toEqual([key]);
    }
  });

  it('a key function that throws is a LockKeyError naming it (not its TypeError); its HTTP exception or LockKeyError passes as it is', () => {
    const orderKey = compileKeySource((dto: { order?: { id: string } }) => `order:${dto.order!.id}`, 1, WHERE);
    const call = () => orderKey.resolve(undefined, [{}]);
    expect(call).toThrow(LockKeyError);
    expect(call).toThrow(
      /^@Locked on Svc\.method: the key function threw TypeError: Cannot read properties of undefined \(reading 'id'\);.*The method was not run\.$/,
    );
    const thrown = (() => {
      try {
        call();
      } catch (error) {
        return error as Error;
      }
    })();
    expect(thrown?.cause).toBeInstanceOf(TypeError);
    expect(() =>
      compileKeySource(
        () => {
          // eslint-disable-next-line @typescript-eslint/only-throw-error -- a key function may throw anything
          throw 'no tenant';
        },
        0,
        WHERE,
      ).resolve(undefined, []),
    ).toThrow(/the key function threw the string "no tenant"/);

    const forbidden = new ForbiddenException('not a member of any tenant');
    const own = new LockKeyError('built by lockKey()');
    for (const error of [forbidden, own]) {
      expect(() =>
        compileKeySource(
          () => {
            throw error;
          },
          0,
          WHERE,
        ).resolve(undefined, []),
      ).toThrow(error);
    }
  });

  it('resolves every template of an array', () => {
    expect(compileKeySource(['acct:<0>', 'acct:<1>'], 2, WHERE).resolve(undefined, [1, 2])).toEqual(['acct:1', 'acct:2']);
  });
});

describe('properties (fast-check)', () => {
  // Few distinct characters, heavy on the separator and on the escape's own text, so that two
  // inputs that differ only in how one string was cut, or in a character versus its escaped
  // spelling, come up in almost every run: independent random pairs almost never collide, even
  // under an escape that is not injective (they passed 100,000 runs against one).
  const unit = fc.constantFrom('a', ':', '%', '3', 'A', '2', '5');
  const text = fc.string({ minLength: 2, maxLength: 10, unit });

  /** One string cut in two different places: ('a:b', 'c') versus ('a', 'b:c'). */
  const twoSplits = fc.tuple(text, fc.nat(), fc.nat()).map(([s, i, j]) => {
    const at = (n: number) => 1 + (n % (s.length - 1));
    return [
      [s.slice(0, at(i)), s.slice(at(i))],
      [s.slice(0, at(j)), s.slice(at(j))],
    ] as const;
  });

  /** The same arguments, except that one spot holds a character in one and its escaped spelling in the other. */
  const LOOKALIKES: ReadonlyArray<readonly [string, string]> = [
    [':', '%3A'],
    ['%', '%25'],
    ['%3A', '%253A'],
    [':', '%'],
    ['%25', '%2525'],
  ];
  const lookalikes = fc.tuple(text, text, fc.nat(), fc.constantFrom(...LOOKALIKES), fc.boolean()).map(([a, b, n, [x, y], second]) => {
    const source = second ? b : a;
    const at = n % (source.length + 1);
    const put = (s: string) => source.slice(0, at) + s + source.slice(at);
    return second
      ? ([
          [a, put(x)],
          [a, put(y)],
        ] as const)
      : ([
          [put(x), b],
          [put(y), b],
        ] as const);
  });

  const templates = fc.constantFrom('x:<0>:<1>', '<0>:<1>', 'a:<0>::<1>:z', '%<0>x:y<1>%', '<0>:%3A<1>', '<0.v>:<1.v>');

  it('is deterministic, and injective for one string cut in different places and for escape look-alikes (2,000 runs)', () => {
    fc.assert(
      fc.property(templates, fc.oneof(twoSplits, lookalikes), (t, [[a, b], [c, d]]) => {
        const parsed = parseKeyTemplate(t, WHERE);
        const args = (x: string, y: string) => (t.includes('.v') ? [{ v: x }, { v: y }] : [x, y]);
        const k1 = resolveKeyTemplate(parsed, args(a, b), WHERE);
        expect(resolveKeyTemplate(parsed, args(a, b), WHERE)).toBe(k1);
        const k2 = resolveKeyTemplate(parsed, args(c, d), WHERE);
        expect(k1 === k2).toBe(a === c && b === d);
      }),
      { numRuns: 2_000 },
    );
  });

  it('gives numbers, bigints and booleans the key of their text (and nothing else)', () => {
    const template = parseKeyTemplate('x:<0>:<1>', WHERE);
    const value = fc.oneof(fc.integer(), fc.boolean(), fc.bigInt(), fc.string({ minLength: 1, unit }));
    fc.assert(
      fc.property(value, value, (a, b) => {
        expect(resolveKeyTemplate(template, [a, b], WHERE)).toBe(resolveKeyTemplate(template, [String(a), String(b)], WHERE));
      }),
      { numRuns: 500 },
    );
  });
});

describe('lockKey(template, ...args)', () => {
  it('builds the very key @Locked builds, with the same escaping and errors', () => {
    expect(lockKey('x:<0>:<1>', 'a:b', 'c')).toBe(resolve('x:<0>:<1>', ['a:b', 'c']));
    expect(lockKey('x:<0>:<1>', 'a:b', 'c')).not.toBe(lockKey('x:<0>:<1>', 'a', 'b:c'));
    expect(lockKey('seat:<0.row>', { row: 7 })).toBe('seat:7');
    expect(() => lockKey('seat:<0>', undefined)).toThrow(LockKeyError);
    // It runs no method: its errors do not say one was not run (the decorator's do).
    expect(() => lockKey('seat:<0>', undefined)).not.toThrow(/method/);
    expect(() => lockKey('seat:<0.id>', null)).not.toThrow(/method/);
  });

  it('keeps at most 1,000 parsed templates: templates built per call (an id inside) do not grow memory forever', () => {
    for (let id = 0; id < 2_500; id++) expect(lockKey(`order:${id}:<0>`, 'x')).toBe(`order:${id}:x`);
    expect(parsedTemplates.size).toBeLessThanOrEqual(1_000);
    expect(lockKey('order:<0>', 7)).toBe('order:7');
  });
});

describe('hostile key values', () => {
  const revoked = (): unknown => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  };

  it("a revoked Proxy as a key, or as a key function's result, is a LockKeyError (not a TypeError)", () => {
    expect(() => normalizeKeys(revoked())).toThrow(LockKeyError);
    expect(() => normalizeKeys([revoked()])).toThrow(LockKeyError);
    const source = compileKeySource(() => revoked() as string, 0, '@Locked on X.m');
    expect(() => source.resolve(undefined, [])).toThrow(LockKeyError);
  });

  it('an object whose constructor getter throws is described, not rethrown', () => {
    const hostile = Object.create(null, {
      constructor: {
        get: () => {
          throw new Error('boom');
        },
      },
    }) as object;
    expect(() => normalizeKeys(hostile)).toThrow(LockKeyError);
    expect(() => normalizeKeys(hostile)).toThrow(/cannot be inspected/);
  });
});
