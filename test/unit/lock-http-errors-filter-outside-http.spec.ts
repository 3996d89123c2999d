/**
 * `LockHttpErrorsFilter` caught a lock error outside HTTP: the client gets Nest's own default answer, as if the
 * filter were not there, never the lock error (whose key can carry user data). Checked against Nest's real
 * exception handlers where they are installed (RPC, external contexts such as GraphQL); for WebSockets,
 * `@nestjs/websockets` is not a dependency of this repository, so its BaseWsExceptionFilter is stood in for.
 * The e2e counterpart, a TCP microservice: test/e2e/locked-http-filter-rpc.spec.ts.
 */
import 'reflect-metadata';
import { ArgumentsHost, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { ExternalExceptionsHandler } from '@nestjs/core/exceptions/external-exceptions-handler';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { RpcExceptionsHandler } from '@nestjs/microservices/exceptions/rpc-exceptions-handler';
import { firstValueFrom, type Observable } from 'rxjs';
import { LockBusyError, LockHttpErrorsFilter } from '../../lib';

const KEY = 'user:alice@example.com';
const busy = () => new LockBusyError(KEY, 1_000);

function hostOf(type: string, args: unknown[]): ArgumentsHost {
  const host = new ExecutionContextHost(args);
  host.setType(type);
  return host;
}

/** The filter as Nest registers a global filter: matched by its @Catch list. */
const asCustomFilter = (filter: LockHttpErrorsFilter) => ({
  exceptionMetatypes: [LockBusyError],
  // Typed as RPC filters are: Nest reads whatever the filter returns as the answer's Observable.
  func: (error: unknown, host: ArgumentsHost) => filter.catch(error, host) as Observable<never>,
});

describe('LockHttpErrorsFilter outside HTTP', () => {
  const filter = new LockHttpErrorsFilter(new HttpAdapterHost());
  let loggedErrors: jest.SpyInstance;

  beforeEach(() => (loggedErrors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined)));
  afterEach(() => loggedErrors.mockRestore());

  it("RPC: Nest's RpcExceptionsHandler answers as without the filter (generic error, the lock error logged)", async () => {
    const handler = new RpcExceptionsHandler();
    handler.setCustomFilters([asCustomFilter(filter)]);
    const error = busy();
    const answer$ = handler.handle(error, hostOf('rpc', [{ email: 'alice@example.com' }, {}])) as Observable<unknown>;
    await expect(firstValueFrom(answer$)).rejects.toEqual({ status: 'error', message: 'Internal server error' });
    expect(loggedErrors).toHaveBeenCalledWith(error);
  });

  it("an external context (GraphQL, …): Nest's ExternalExceptionsHandler applies its default (rethrows, logged), not an Observable as the result", () => {
    const handler = new ExternalExceptionsHandler();
    handler.setCustomFilters([asCustomFilter(filter)]);
    const error = busy();
    expect(() => handler.next(error, hostOf('graphql', [{}, {}, {}, {}]))).toThrow(error);
    expect(loggedErrors).toHaveBeenCalledWith(error);
  });

  it("WebSockets: the error is handed to @nestjs/websockets' BaseWsExceptionFilter, which answers the client (the filter's return value is ignored there)", () => {
    const handled: Array<{ error: unknown; host: ArgumentsHost }> = [];
    jest.doMock(
      '@nestjs/websockets',
      () => ({
        BaseWsExceptionFilter: class {
          catch(error: unknown, host: ArgumentsHost) {
            handled.push({ error, host });
          }
        },
      }),
      { virtual: true },
    );
    try {
      const client = { emit: jest.fn() };
      const host = hostOf('ws', [client, { email: 'alice@example.com' }, 'rename']);
      const error = busy();
      expect(filter.catch(error, host)).toBeUndefined();
      expect(handled).toEqual([{ error, host }]);
      expect(client.emit).not.toHaveBeenCalled();
    } finally {
      jest.dontMock('@nestjs/websockets');
    }
  });

  it("WebSockets, @nestjs/websockets not resolvable from the library: Nest's default event and message all the same, and the error logged", () => {
    expect(() => require.resolve('@nestjs/websockets')).toThrow(); // as in this repository: the fallback is what runs
    const client = { emit: jest.fn() };
    const error = busy();
    expect(filter.catch(error, hostOf('ws', [client, { email: 'alice@example.com' }, 'rename']))).toBeUndefined();
    expect(client.emit.mock.calls).toEqual([['exception', { status: 'error', message: 'Internal server error' }]]);
    expect(loggedErrors).toHaveBeenCalledWith(error);
  });
});
