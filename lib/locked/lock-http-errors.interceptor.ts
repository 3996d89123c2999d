import { CallHandler, ConflictException, ExecutionContext, Injectable, NestInterceptor, ServiceUnavailableException } from '@nestjs/common';
import { Observable, catchError, throwError } from 'rxjs';
import { LockBusyError } from '../errors/lock-busy.error';
import { LockConnectionError } from '../errors/lock-connection.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';

/**
 * Registered globally by `DistributedLockModule` (APP_INTERCEPTOR). In HTTP handlers only, turns
 * `LockBusyError`/`LockTimeoutError` into 409 Conflict and `LockConnectionError` (or a service that is shutting
 * down, `LockServiceClosedError`: another instance can serve the retry) into 503, with a JSON
 * body naming the resource. It converts to standard `HttpException`s (original error as `cause`)
 * instead of answering itself, so the application's own exception filters still see and format
 * them, on Express and Fastify alike. It locks nothing: the lock is the `@Locked` wrapper's alone.
 * Other contexts (cron, events, microservices) keep the typed errors.
 */
@Injectable()
export class LockHttpErrorsInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    return next.handle().pipe(catchError((error: unknown) => throwError(() => toHttpError(error))));
  }
}

/** @internal The HTTP exception for a lock error (others pass through). */
export function toHttpError(error: unknown): unknown {
  if (error instanceof LockBusyError || error instanceof LockTimeoutError) {
    return new ConflictException(
      {
        statusCode: 409,
        error: 'Conflict',
        message: error.message,
        resource: error.key,
        reason: error instanceof LockBusyError ? 'busy' : 'timeout',
      },
      { cause: error },
    );
  }
  if (error instanceof LockServiceClosedError) {
    return new ServiceUnavailableException(
      { statusCode: 503, error: 'Service Unavailable', message: 'This instance is shutting down; retry on another.', operation: 'acquire' },
      { cause: error },
    );
  }
  if (error instanceof LockConnectionError) {
    return new ServiceUnavailableException(
      { statusCode: 503, error: 'Service Unavailable', message: 'The lock store is unreachable; retry later.', operation: error.operation },
      { cause: error },
    );
  }
  return error;
}
