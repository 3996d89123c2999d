/**
 * `LockHttpErrorsFilter` registered globally in a hybrid application (HTTP plus a TCP microservice) answers
 * HTTP only: an RPC client whose `@Locked` handler finds its key busy gets Nest's own default answer, exactly
 * as without the filter, and Nest logs the error. Before, the filter handed the lock error itself back to Nest
 * as the answer, and the RPC client received it serialised, the resolved key (an e-mail address) included.
 */
import 'reflect-metadata';
import { Controller, INestApplication, Module, Provider } from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost } from '@nestjs/core';
import { ClientProxy, ClientProxyFactory, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { firstValueFrom } from 'rxjs';
import { DistributedLockModule, Locked, LockHttpErrorsFilter, LockService, lockKey } from '../../lib';
import { freePort } from '../harness/free-port';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ErrorLog } from '../harness/error-log';

/** In the key of the lock below: must never reach a client. */
const EMAIL = 'alice@example.com';
const TEMPLATE = 'rpc-user:<0.email>';

@Controller()
class UsersRpc {
  @MessagePattern('rename')
  @Locked(TEMPLATE, { onBusy: 'throw' })
  async rename(@Payload() data: { email: string }) {
    return { renamed: data.email };
  }
}

type FilterRegistration = 'none' | 'APP_FILTER' | 'useGlobalFilters';

describe.each<FilterRegistration>(['none', 'APP_FILTER', 'useGlobalFilters'])(
  'a busy @Locked @MessagePattern, LockHttpErrorsFilter: %s',
  (filter) => {
    let redis: SharedRedis;
    let app: INestApplication;
    let client: ClientProxy;
    const logged = new ErrorLog();

    beforeAll(async () => {
      redis = await RedisProcess.shared();
      const port = await freePort();
      const providers: Provider[] = filter === 'APP_FILTER' ? [{ provide: APP_FILTER, useClass: LockHttpErrorsFilter }] : [];
      @Module({ imports: [DistributedLockModule.forRoot({ redis: redis.url })], controllers: [UsersRpc], providers })
      class AppModule {}
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      app = moduleRef.createNestApplication({ logger: logged });
      if (filter === 'useGlobalFilters') app.useGlobalFilters(new LockHttpErrorsFilter(app.get(HttpAdapterHost)));
      // inheritAppConfig: the microservice gets the application's global filters, as a hybrid application usually wants.
      app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } }, { inheritAppConfig: true });
      await app.startAllMicroservices();
      await app.init();
      client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
      await client.connect();
    });

    afterAll(async () => {
      await client?.close();
      await app?.close();
      await redis?.stop();
    });

    const rename = () =>
      firstValueFrom(client.send<unknown>('rename', { email: EMAIL })).then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error }),
      );

    it('a free key: the handler replies', async () => {
      await expect(rename()).resolves.toEqual({ reply: { renamed: EMAIL } });
    });

    it("the RPC client gets Nest's default answer, never the lock error or its key; the error is logged on the server", async () => {
      const held = await app.get(LockService).acquire(lockKey(TEMPLATE, { email: EMAIL }));
      try {
        logged.errors.length = 0;
        const answer = await rename();
        expect(answer).toEqual({ error: { status: 'error', message: 'Internal server error' } });
        expect(JSON.stringify(answer)).not.toContain('alice');
        expect(logged.errors).toEqual([expect.objectContaining({ name: 'LockBusyError' })]);
      } finally {
        await held.release();
      }
    });
  },
);
