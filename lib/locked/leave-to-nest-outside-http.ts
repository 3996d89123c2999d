import { ArgumentsHost, Logger } from '@nestjs/common';

/** The part of `@nestjs/websockets`' BaseWsExceptionFilter used here, typed locally: the package is not a dependency. */
interface WsDefaultFilter {
  catch(exception: unknown, host: ArgumentsHost): void;
}

/**
 * What an HTTP-only exception filter does with an error it caught outside HTTP: it leaves the error to Nest,
 * so a microservice or gateway client gets exactly what it would get without the filter. For a lock error
 * that is Nest's generic `{ status: 'error', message: 'Internal server error' }`, and Nest logs the error:
 * the error itself, whose key can carry user data (an e-mail address), stays on the server.
 *
 * - RPC (microservices) and external contexts (GraphQL, …): Nest's handlers there (RpcExceptionsHandler,
 *   ExternalExceptionsHandler, Nest 10 to 12) apply their own default when the filter returns nothing.
 *   Whatever a filter returns instead is the answer: an Observable erroring with the lock error would send
 *   the error object, key included, to the RPC client.
 * - WebSockets: WsExceptionsHandler runs its default only when no filter matched, so it is run here, by
 *   Nest's own BaseWsExceptionFilter (the payload and its `cause` differ between Nest 10, 11 and 12).
 */
export function leaveToNestOutsideHttp(error: unknown, host: ArgumentsHost): undefined {
  if (host.getType() === 'ws') (loadWsDefaultFilter() ?? wsFallback).catch(error, host);
  return undefined;
}

/**
 * `@nestjs/websockets`' BaseWsExceptionFilter. Required on a WebSocket error only, never when the library is
 * loaded: an application with a gateway has the package, and one without never needs it.
 */
function loadWsDefaultFilter(): WsDefaultFilter | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional: a static import would make every application install it
    const websockets = require('@nestjs/websockets') as { BaseWsExceptionFilter: new () => WsDefaultFilter };
    return new websockets.BaseWsExceptionFilter();
  } catch {
    return undefined;
  }
}

/**
 * Nest's default for an unknown WebSocket error, for a package manager that hides `@nestjs/websockets` from
 * this library (pnpm without hoisting): the same event and message, and the error logged under the same
 * context, so the client is told and nothing is swallowed.
 */
const wsFallback: WsDefaultFilter = {
  catch(error: unknown, host: ArgumentsHost): void {
    const client = host.switchToWs().getClient<{ emit?: (event: string, payload: unknown) => unknown }>();
    if (typeof client?.emit === 'function') client.emit('exception', { status: 'error', message: 'Internal server error' });
    new Logger('WsExceptionsHandler').error(error);
  },
};
