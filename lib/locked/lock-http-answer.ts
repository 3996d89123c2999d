import { BadRequestException, ConflictException, HttpException, ServiceUnavailableException } from '@nestjs/common';
import { DeferArgumentError } from '../errors/defer-argument.error';
import { LockBusyError } from '../errors/lock-busy.error';
import { LockConnectionError } from '../errors/lock-connection.error';
import { LockKeyError } from '../errors/lock-key.error';
import { LockLostError } from '../errors/lock-lost.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { lockNameOf } from './lock-error-names';
import { isRequestArgumentError, isRequestKeyError } from './request-key-errors';
import { isAclRefusal } from '../errors/acl-refusal-mark';
import { MAX_KEYS_PER_LOCK } from '../keys/key-limits';
import { MAX_DEFERRED_ARGUMENT_DEPTH, MAX_DEFERRED_ARGUMENTS_BYTES, MAX_DEFERRED_ARGUMENTS_SIZE } from '../defer/defer-argument-limits';

/**
 * `Retry-After` of every lock answer, in seconds. Not the holder's remaining lease: the watchdog
 * renews a live holder's lease, so it says when a crashed holder's key frees, not when the work
 * ends; with the default ttl (30 s) it would tell clients to wait 20–30 s for work that usually
 * takes milliseconds. 1 s is the smallest value the header can say.
 */
export const LOCK_RETRY_AFTER_SECONDS = 1;

/** How an HTTP client is answered for a lock error: the exception (original error as `cause`) and its `Retry-After`. */
export interface LockHttpAnswer {
  exception: HttpException;
  /** Absent when the same request can never succeed (400): a retry is pointless. */
  retryAfterSeconds?: number;
}

/**
 * The HTTP answer for a lock error, or undefined for any other error. A 409 or 400 body names the lock by
 * its `@Locked` template (`resource: 'user:<0>'`), never by the resolved key or the value that made it,
 * which can carry user data (an e-mail address); they stay on the server, in `exception.cause`.
 */
export function lockHttpAnswer(error: unknown): LockHttpAnswer | undefined {
  if (error instanceof LockBusyError || error instanceof LockTimeoutError) {
    const name = lockNameOf(error);
    const lock = name === undefined ? 'A lock this request needs' : `The lock "${name}"`;
    const busy = error instanceof LockBusyError;
    const message = busy
      ? `${lock} is held by another request; retry later.`
      : `${lock} stayed held by another request for the whole wait (${Math.round(error.waitedMs)} ms); retry later.`;
    const body = {
      statusCode: 409,
      error: 'Conflict',
      message,
      ...(name === undefined ? {} : { resource: name }),
      reason: busy ? 'busy' : 'timeout',
    };
    return { exception: new ConflictException(body, { cause: error }), retryAfterSeconds: LOCK_RETRY_AFTER_SECONDS };
  }
  if (error instanceof LockKeyError) return isRequestKeyError(error) ? invalidKey(error) : undefined;
  if (error instanceof DeferArgumentError) return isRequestArgumentError(error) ? invalidArguments(error) : undefined;
  if (error instanceof LockServiceClosedError) return unavailable('This instance is shutting down; retry on another.', 'acquire', error);
  // A refusal by the store's ACL is no outage: every retry, on every instance, meets it until an operator grants the
  // permission. Told "retry later" (503, Retry-After), clients retried for ever and nothing was logged (Nest logs no
  // HttpException); left to Nest, it is a logged 500 whose log line names the grant.
  if (error instanceof LockConnectionError) {
    return isAclRefusal(error) ? undefined : unavailable('The lock store is unreachable; retry later.', error.operation, error);
  }
  // The handler stopped because its lock ended under it (it threw the signal's reason, or extend() found it
  // lost): the request was cut short by trouble of the server's, and a retry can succeed. The loss itself
  // is logged where it was seen (a warning naming the key); the answer names no key. Not 'max-hold': the
  // handler outran a limit of its own, which every retry would meet again (Nest's logged 500).
  if (error instanceof LockLostError && error.reason !== 'max-hold') {
    const message =
      error.reason === 'shutdown'
        ? 'This instance is shutting down and stopped the request; retry on another.'
        : 'The lock this request held was lost before it finished (the lock store unreachable, or the instance paused); retry.';
    return unavailable(message, 'hold', error);
  }
  return undefined;
}

/**
 * Sets a header on whatever response object the platform hands out: an Express response or a
 * Fastify reply (`header`), or the raw Node response Fastify gives middleware (`setHeader`; Node merges
 * it into the reply's own headers). Nothing once the headers are sent.
 */
export function setResponseHeader(response: unknown, name: string, value: string): void {
  const r = response as {
    header?: (n: string, v: string) => unknown;
    setHeader?: (n: string, v: string) => unknown;
    raw?: unknown;
    headersSent?: boolean;
  };
  const raw = (r.raw ?? r) as { headersSent?: boolean };
  if (raw.headersSent) return;
  if (typeof r.header === 'function') r.header(name, value);
  else if (typeof r.setHeader === 'function') r.setHeader(name, value);
}

/**
 * Answers with `status` although the route's own code (200/201, or @HttpCode) is applied after interceptors:
 * sets it now, and turns the platform's next status call on this response (Express `status`, Fastify
 * `status`/`code`) into one setting `status`, once; the original methods are back after that call.
 */
export function pinResponseStatus(response: unknown, status: number): void {
  const r = response as Record<string, unknown>;
  if (typeof r.code === 'function') (r.code as (s: number) => unknown).call(response, status);
  else if (typeof r.status === 'function') (r.status as (s: number) => unknown).call(response, status);
  for (const method of ['status', 'code']) {
    const original = r[method];
    if (typeof original !== 'function') continue;
    const own = Object.prototype.hasOwnProperty.call(r, method);
    r[method] = function (this: unknown) {
      if (own) r[method] = original;
      else delete r[method];
      return (original as (s: number) => unknown).call(this, status);
    };
  }
}

/**
 * 400: the key of the route handler's own `@Locked` could not be made from the request (a value missing, empty,
 * an object, too long), or the request made more keys than one lock takes (`keyCount`: a key function returning
 * `body.ids`), so the method did not run. The handler's arguments are the client's input, which Nest
 * answers 400 too (ValidationPipe), and, like every HttpException, not logged by Nest: a stack per bad request
 * would be noise. Any other LockKeyError (a service's lock, `withLock` in the handler) gets no answer here: it
 * is a server bug, a logged 500. The programmer's share of a handler's template is refused at startup (syntax, a
 * parameter the method does not declare); only a misspelt property path (`<0.emial>`) is left to show as a 400
 * on every request. No `Retry-After`: the same request fails again. The message never shows the value received.
 */
function invalidKey(error: LockKeyError): LockHttpAnswer {
  const name = lockNameOf(error);
  const lock = name === undefined ? 'a lock this request needs' : `the lock "${name}"`;
  if (error.keyCount !== undefined) {
    // The count is the client's own (how many items it sent); no key or value is shown.
    const message =
      `This request makes ${error.keyCount} keys for ${lock}; one lock takes at most ${MAX_KEYS_PER_LOCK} ` +
      `(duplicates count). Send fewer items in one request.`;
    return badRequest(message, name, 'too-many-keys', error);
  }
  const message = `The key of ${lock} cannot be made from this request: a value it is built from is missing, empty, too long or not a valid key part (a string or a number).`;
  return badRequest(message, name, 'invalid-key', error);
}

/**
 * 400: the arguments of the route handler's own deferring `@Locked` (the request's input) are over a limit of a
 * job: nested too deep, or too large (see isRequestArgumentError). JSON a client may send, refused for the job
 * only; before, a logged 500 any client could cause. As for invalidKey: not logged, no `Retry-After` (the same
 * request fails again), and the message names the problem and the lock's template, never a value or a path
 * (its property names are the client's).
 */
function invalidArguments(error: DeferArgumentError): LockHttpAnswer {
  const name = lockNameOf(error);
  const under = name === undefined ? '' : ` under the lock "${name}"`;
  const problem =
    error.limit === 'depth'
      ? `it is nested more than ${MAX_DEFERRED_ARGUMENT_DEPTH} levels deep (objects and arrays inside one another)`
      : `it takes more than ${MAX_DEFERRED_ARGUMENTS_BYTES} bytes (${MAX_DEFERRED_ARGUMENTS_SIZE}) as JSON`;
  const reason = error.limit === 'depth' ? 'arguments-too-deep' : 'arguments-too-large';
  return badRequest(`This request's input cannot be deferred${under}: ${problem}.`, name, reason, error);
}

/** 400 naming the lock by its template (`resource`, when it has one), never a value; no `Retry-After`. */
function badRequest(message: string, name: string | undefined, reason: string, cause: Error): LockHttpAnswer {
  const body = { statusCode: 400, error: 'Bad Request', message, ...(name === undefined ? {} : { resource: name }), reason };
  return { exception: new BadRequestException(body, { cause }) };
}

/** 503: another instance (or this one, a little later) can serve the retry. */
function unavailable(message: string, operation: string, cause: Error): LockHttpAnswer {
  const body = { statusCode: 503, error: 'Service Unavailable', message, operation };
  return { exception: new ServiceUnavailableException(body, { cause }), retryAfterSeconds: LOCK_RETRY_AFTER_SECONDS };
}
