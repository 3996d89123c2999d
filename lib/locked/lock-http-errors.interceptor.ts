import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor, Optional } from '@nestjs/common';
import { Observable, catchError, map, throwError } from 'rxjs';
import { Deferred } from '../defer/deferred';
import { LOCKED_LOCK_SERVICE, type LockedLockService } from './lock-service-injection';
import { lockHttpAnswer, pinResponseStatus, setResponseHeader } from './lock-http-answer';

/**
 * Registered globally by `DistributedLockModule` (APP_INTERCEPTOR); its error mapping is off with
 * `httpErrors: false`. In HTTP handlers only, turns `LockBusyError`/`LockTimeoutError` into 409 Conflict and
 * `LockConnectionError` (or a service that is shutting down, `LockServiceClosedError`: another
 * instance can serve the retry) into 503, both with `Retry-After`, and `LockKeyError` (no valid key
 * could be made from the request) or `DeferArgumentError` (the request's input nested too deep or too large
 * to defer) into 400 Bad Request; each with a JSON body naming the lock by its
 * template, never by its key. It converts to standard `HttpException`s (original error as `cause`)
 * instead of answering itself, so the application's own exception filters still see and format
 * them, on Express and Fastify alike. It locks nothing: the lock is the `@Locked` wrapper's alone.
 * Other contexts (cron, events, microservices) keep the typed errors; guards and middleware run
 * outside interceptors (see `LockHttpErrorsFilter`). A `Deferred` result (`onBusy: 'defer'`) is answered 202 Accepted, also
 * with `httpErrors: false`.
 */
@Injectable()
export class LockHttpErrorsInterceptor implements NestInterceptor {
  constructor(@Optional() @Inject(LOCKED_LOCK_SERVICE) private readonly locks?: LockedLockService) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    // A deferred @Locked call: 202 Accepted, the Deferred (job id) as the body. Not an error mapping,
    // so `httpErrors: false` keeps it (a 201 would tell the client its request was carried out).
    const answered = next.handle().pipe(
      map((value: unknown) => {
        if (value instanceof Deferred) pinResponseStatus(context.switchToHttp().getResponse(), 202);
        return value;
      }),
    );
    // A LockService replaced by a test double may have no engine: the mapping then stays on, harmlessly.
    if (this.locks?.engine?.settings?.httpErrors === false) return answered;
    return answered.pipe(
      catchError((error: unknown) => {
        const answer = lockHttpAnswer(error);
        if (!answer) return throwError(() => error);
        if (answer.retryAfterSeconds !== undefined) {
          setResponseHeader(context.switchToHttp().getResponse(), 'Retry-After', String(answer.retryAfterSeconds));
        }
        return throwError(() => answer.exception);
      }),
    );
  }
}
