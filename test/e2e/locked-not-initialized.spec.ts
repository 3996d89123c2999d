/**
 * A @Locked call made before the application was initialised (compile() without init(),
 * NestFactory.create() before listen()/init()) fails with LockModuleNotInitializedError, saying to
 * initialise: the module IS imported, so "import DistributedLockModule" would send the user to the
 * wrong place. A missing module still says to import it. Neither runs the method nor touches Redis.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { DistributedLockError, DistributedLockModule, Locked, LockModuleNotInitializedError } from '../../lib';
import { redisSuite } from '../unit/core-helpers';

const PREFIX = 'ni:';
const ran: string[] = [];

@Injectable()
class Billing {
  @Locked('invoice:<0>')
  async invoice(id: string) {
    ran.push(id);
    return `invoiced ${id}`;
  }
}

/** Made by a factory: the injector never builds it, so only the module's startup can reach it. */
class Reports {
  @Locked('report:<0>')
  async render(id: string) {
    ran.push(id);
    return `rendered ${id}`;
  }
}

function appModule(redisUrl: string | undefined) {
  @Module({
    imports: redisUrl ? [DistributedLockModule.forRoot({ redis: redisUrl, keyPrefix: PREFIX })] : [],
    providers: [Billing, { provide: Reports, useFactory: () => new Reports() }],
  })
  class AppModule {}
  return AppModule;
}

describe('@Locked before the application is initialised', () => {
  const suite = redisSuite();
  beforeEach(() => (ran.length = 0));

  it('Test.createTestingModule().compile() without init(): LockModuleNotInitializedError naming moduleRef.init(); works after init()', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [appModule(suite.redis.url)] }).compile();
    try {
      const error = await moduleRef
        .get(Billing)
        .invoice('1')
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockModuleNotInitializedError);
      expect(error).toBeInstanceOf(DistributedLockError);
      const { message } = error as Error;
      expect(message).toMatch(/^@Locked on Billing\.invoice was called before the application was initialised/);
      expect(message).toContain('await moduleRef.init()');
      expect(message).not.toMatch(/Import DistributedLockModule/);
      // The factory-made instance (not built by the injector) says the same.
      await expect(moduleRef.get(Reports).render('1')).rejects.toThrow(LockModuleNotInitializedError);
      expect(ran).toEqual([]);
      expect(await suite.client.keys(`${PREFIX}*`)).toEqual([]);

      await moduleRef.init();
      await expect(moduleRef.get(Billing).invoice('2')).resolves.toBe('invoiced 2');
      await expect(moduleRef.get(Reports).render('2')).resolves.toBe('rendered 2');
      expect(ran).toEqual(['2', '2']);
    } finally {
      await moduleRef.close();
    }
  });

  it('NestFactory.create() before listen()/init(): LockModuleNotInitializedError naming app.init() and listen(); works after init()', async () => {
    const app = await NestFactory.create(appModule(suite.redis.url), { logger: false });
    try {
      const error = await app
        .get(Billing)
        .invoice('3')
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockModuleNotInitializedError);
      expect((error as Error).message).toContain('await app.init()');
      expect((error as Error).message).toContain('app.listen(');
      expect(ran).toEqual([]);

      await app.init();
      await expect(app.get(Billing).invoice('4')).resolves.toBe('invoiced 4');
    } finally {
      await app.close();
    }
  });

  it('without the module (initialised or not) the error still says to import it, and is not the "not initialised" one', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [appModule(undefined)] }).compile();
    try {
      for (const stage of ['compiled', 'initialised']) {
        if (stage === 'initialised') await moduleRef.init();
        const error = await moduleRef
          .get(Billing)
          .invoice('5')
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DistributedLockError);
        expect(error).not.toBeInstanceOf(LockModuleNotInitializedError);
        expect((error as Error).message).toMatch(/Import DistributedLockModule\.forRoot/);
      }
      expect(ran).toEqual([]);
    } finally {
      await moduleRef.close();
    }
  });

  it('after close(), a compiled-but-never-initialised module no longer makes other calls say "not initialised"', async () => {
    const never = await Test.createTestingModule({ imports: [appModule(suite.redis.url)] }).compile();
    await never.close();
    await expect(new Billing().invoice('6')).rejects.toThrow(/no LockService is attached to its instance/);
    expect(ran).toEqual([]);
  });
});
