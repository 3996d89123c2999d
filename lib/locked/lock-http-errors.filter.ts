import { ArgumentsHost, Catch, ExceptionFilter, Injectable } from '@nestjs/common';
import { BaseExceptionFilter, HttpAdapterHost } from '@nestjs/core';
import { DeferArgumentError } from '../errors/defer-argument.error';
import { LockBusyError } from '../errors/lock-busy.error';
import { LockConnectionError } from '../errors/lock-connection.error';
import { LockKeyError } from '../errors/lock-key.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { leaveToNestOutsideHttp } from './leave-to-nest-outside-http';
import { lockHttpAnswer, setResponseHeader } from './lock-http-answer';

/**
 * The 409/503/400 answers of the module's interceptor, for lock errors thrown where no interceptor runs:
 * guards and middleware (and handlers, when `httpErrors: false`). Answers directly, on Express and
 * Fastify:
 *
 * ```ts
 * app.useGlobalFilters(new LockHttpErrorsFilter(app.get(HttpAdapterHost)));
 * // or in a module: providers: [{ provide: APP_FILTER, useClass: LockHttpErrorsFilter }]
 * ```
 *
 * Outside HTTP (microservices, WebSockets) the filter steps aside: the client gets Nest's own default
 * answer, as without the filter, never the lock error (see `leaveToNestOutsideHttp`).
 */
@Catch(LockBusyError, LockTimeoutError, LockConnectionError, LockServiceClosedError, LockKeyError, DeferArgumentError)
@Injectable()
export class LockHttpErrorsFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: unknown, host: ArgumentsHost): unknown {
    if (host.getType() !== 'http') return leaveToNestOutsideHttp(error, host);
    const answer = lockHttpAnswer(error);
    // A LockKeyError or DeferArgumentError that is not the request's fault (see request-key-errors.ts): a
    // server bug, answered and logged as Nest answers any unknown error (500).
    if (!answer) return new BaseExceptionFilter(this.adapterHost.httpAdapter).catch(error, host);
    const response: unknown = host.switchToHttp().getResponse();
    if (answer.retryAfterSeconds !== undefined) setResponseHeader(response, 'Retry-After', String(answer.retryAfterSeconds));
    this.adapterHost.httpAdapter.reply(response, answer.exception.getResponse(), answer.exception.getStatus());
    return undefined;
  }
}
