import type { ClusterNode, Redis } from 'ioredis';
import { LockConnectionError } from '../errors/lock-connection.error';
import { monotonicNow } from '../time/clock';
import type { CommandGate } from './command-deadlines';
import { closedOnPurposeBy, isClusterClient, socketOf, type RedisClient } from './redis-connection';

/**
 * ioredis' own words for "this command never got an answer because the connection is gone"
 * (`enableOfflineQueue: false`, `maxRetriesPerRequest: 0`): true but unhelpful, and they name
 * ioredis options the user never set. Replaced by what happened and what to do (see `explain`).
 */
const IOREDIS_CONNECTION_FAILURE = /^(Stream isn't writeable|Cluster isn't ready|Connection is closed\.|Reached the max retries per request limit)/;

/**
 * A check a new connection must pass before lock calls go through it: resolves with why calls must not (a function
 * making the error for one operation), or undefined when they may, or when the server could not say. Never rejects.
 */
export type ConnectionCheck = () => Promise<((operation: string) => Error) | undefined>;

/** A connection refused by its check is checked again after this long (ms): a replica may be promoted meanwhile. */
export const RECHECK_REFUSED_MS = 1_000;

/**
 * What this process knows about its Redis connection, so that every lock call is admitted,
 * held back or refused by the truth, and its error says so:
 * - ready: sent at once;
 * - never connected yet (a call right after `new LockService()`, or outside Nest without
 *   `onModuleInit()`): the call waits for the first connection within its own commandTimeout, and
 *   fails naming the address and the system's reason when none comes. It never sits in ioredis'
 *   offline queue (which could replay it long after its caller was told it failed);
 * - connected before, down now: refused at once, saying the connection is being re-established;
 * - closed: refused at once;
 * - with a check (checkEachConnection: a single Redis' replica check), each new connection is held back until its
 *   check answers, and refused while the check refuses it.
 *
 * On a connection the module owns it listens to 'ready' and 'error' for as long as the client lives.
 * A user's client gets no lasting listener (a LockService closed and made again would pile them
 * up, and an 'error' listener would silence ioredis' "Unhandled error event" print): readiness is
 * seen at each call, a 'ready' listener is attached only while calls wait, and messages go without
 * the system's reason.
 */
export class ConnectionState implements CommandGate {
  /** Where the connection goes, as messages name it: `Redis at 127.0.0.1:6379`. */
  readonly target: string;
  private everReady: boolean;
  /** The last connection error since the connection was last ready (owned connections only). */
  private lastError?: Error;
  private readonly waitingForReady = new Set<() => void>();
  private readonly onReady = () => {
    this.everReady = true;
    this.lastError = undefined;
    this.sendWaiting();
  };
  /** See checkEachConnection. */
  private check?: ConnectionCheck;
  /** The socket last checked, when, and its verdict (a refusal: calls through that socket fail with it). */
  private checked?: { socket: unknown; at: number; refusal?: (operation: string) => Error };
  /** The socket a check is running for. */
  private checking?: unknown;

  constructor(
    private readonly client: RedisClient,
    private readonly owned: boolean,
  ) {
    this.target = describeTarget(client);
    this.everReady = client.status === 'ready';
    if (owned) {
      client.on('ready', this.onReady);
      // ioredis' own "no connection" words (a command it refused while connecting) say nothing of why: a host that
      // never answers read as "not reachable (Stream isn't writeable and enableOfflineQueue options is false)".
      client.on('error', (error: Error) => {
        if (!IOREDIS_CONNECTION_FAILURE.test(error.message)) this.lastError = error;
      });
    }
  }

  /** True once the connection has been ready at least once. */
  get connectedBefore(): boolean {
    return this.everReady;
  }

  /** ` (connect ECONNREFUSED 127.0.0.1:6379)`, or nothing when no error was seen. */
  get reason(): string {
    return this.lastError ? ` (${this.lastError.message})` : '';
  }

  /** What to check, when the last error says more than "not reachable" (a Sentinel setup's own failures). */
  private get hint(): string {
    return sentinelHint(this.lastError?.message) + protocolHint(this.lastError?.message);
  }

  /**
   * Every new connection (a socket of the client: the first, and each one after a reconnect) is checked by `check`
   * before any call goes through it; calls wait for the verdict within their own deadline.
   */
  checkEachConnection(check: ConnectionCheck): void {
    this.check = check;
  }

  /** `socket` (the client's `stream`) passed the same check elsewhere (startup's): not checked again before its first call. */
  passedCheck(socket: unknown): void {
    if (this.check) this.checked = { socket, at: monotonicNow() };
  }

  admit(operation: string): undefined | Error | 'wait' {
    const { status } = this.client;
    if (status === 'ready') {
      this.everReady = true;
      return this.check ? this.verdict(operation) : undefined;
    }
    // One of ours that ioredis ended on its own is being opened again (reopenWhenEnded): told as a lost connection.
    const reopening = this.owned && !closedOnPurposeBy(this.client);
    if (status === 'end' && !reopening) {
      return new LockConnectionError(
        `Redis ${operation} not sent: the connection to ${this.target} is closed (the LockService was closed, or the client given to it was ` +
          `disconnected or quit, or gave up reconnecting: its retryStrategy returned no delay). ioredis does not open such a client again by itself.`,
        operation,
      );
    }
    if (this.everReady) {
      return new LockConnectionError(
        `Redis ${operation} not sent: the connection to ${this.target} was lost${this.reason} and is being re-established. ` +
          `Lock calls fail with LockConnectionError until it is back; nothing was sent, so retry shortly.`,
        operation,
      );
    }
    // A client made with lazyConnect connects on its first command; ours waits instead of sending one.
    if (status === 'wait') (this.client as Redis).connect().catch(() => undefined);
    return 'wait';
  }

  /** What the check said of the current connection; 'wait' while it has not said yet (a check is started). */
  private verdict(operation: string): undefined | Error | 'wait' {
    const socket = this.socket;
    const checked = this.checked;
    if (checked && checked.socket === socket && (!checked.refusal || monotonicNow() - checked.at < RECHECK_REFUSED_MS)) {
      return checked.refusal?.(operation);
    }
    if (this.checking !== socket) {
      this.checking = socket;
      // A check that fails itself says nothing against the connection (it never should: ConnectionCheck).
      void this.check!()
        .catch(() => undefined)
        .then((refusal) => {
          if (this.checking === socket) this.checking = undefined;
          this.checked = { socket, at: monotonicNow(), refusal };
          // The calls that waited ask again: sent, failed with the refusal, or (a newer socket) waiting for its check.
          this.sendWaiting();
        });
    }
    return 'wait';
  }

  private get socket(): unknown {
    return socketOf(this.client);
  }

  private sendWaiting(): void {
    if (!this.owned) this.client.off('ready', this.onReady);
    const waiting = [...this.waitingForReady];
    this.waitingForReady.clear();
    for (const send of waiting) send();
  }

  whenReady(send: () => void): () => void {
    if (!this.owned && this.waitingForReady.size === 0) this.client.on('ready', this.onReady);
    this.waitingForReady.add(send);
    return () => {
      this.waitingForReady.delete(send);
      if (!this.owned && this.waitingForReady.size === 0) this.client.off('ready', this.onReady);
    };
  }

  notReachable(operation: string, waitedMs: number): Error {
    return new LockConnectionError(
      `${this.target} is not reachable${this.reason}: no connection within ${waitedMs} ms, so ${operation} was not sent. ` +
        `Check the redis option and that the server is running; lock calls fail with LockConnectionError until it is reachable.${this.hint}`,
      operation,
    );
  }

  /** Startup gave up waiting for the first connection (`requireRedisAtStartup`). */
  notReachableAtStartup(waitedMs: number): LockConnectionError {
    return new LockConnectionError(
      `${this.target} is not reachable${this.reason}: no connection within ${waitedMs} ms (startupTimeout), so the application ` +
        `did not start (requireRedisAtStartup). Check the redis option and that the server is running, raise startupTimeout ` +
        `if Redis starts slowly, or set requireRedisAtStartup: false to start without it (lock calls then fail with ` +
        `LockConnectionError until Redis is reachable).${this.hint}`,
      'connect',
    );
  }

  explain(operation: string, error: unknown): Error | undefined {
    if (!(error instanceof Error) || !IOREDIS_CONNECTION_FAILURE.test(error.message)) return undefined;
    if (!this.everReady) {
      return new LockConnectionError(
        `Redis ${operation} failed: ${this.target} is not reachable${this.reason}. Check the redis option and that the server is running.${this.hint}`,
        operation,
        { cause: error },
      );
    }
    return new LockConnectionError(
      `Redis ${operation} got no reply: the connection to ${this.target} was lost${this.reason} and is being re-established. ` +
        `The lock state is unknown; whatever the call did lapses with its lease. Retry once the connection is back.`,
      operation,
      { cause: error },
    );
  }
}

/** `Redis at host:port`, `Redis at /path.sock`, `Redis primary "name" (via Sentinels …)` or `Redis Cluster (nodes …)`. */
export function describeTarget(client: RedisClient): string {
  if (isClusterClient(client)) {
    const nodes = ((client as unknown as { startupNodes?: ClusterNode[] }).startupNodes ?? []).map(nodeText);
    return `Redis Cluster (${nodes.join(', ')})`;
  }
  const o = client.options;
  if (o.sentinels?.length) {
    return `Redis primary "${o.name}" (via Sentinels ${o.sentinels.map((s) => `${s.host ?? 'localhost'}:${s.port ?? 26379}`).join(', ')})`;
  }
  if (o.path) return `Redis at ${o.path}`;
  return `Redis at ${o.host ?? 'localhost'}:${o.port ?? 6379}`;
}

function nodeText(node: ClusterNode): string {
  if (typeof node === 'number') return `localhost:${node}`;
  if (typeof node === 'string') return node;
  return `${node.host ?? 'localhost'}:${node.port ?? 6379}`;
}

/**
 * ioredis' Sentinel errors name a symptom; this names what to check. A wrong primary name is answered
 * by every Sentinel ("No such master with that name"); Sentinels that refuse or drop the connection
 * leave only "All sentinels are unreachable … Connection is closed" (the system's reason is lost).
 */
export function sentinelHint(message: string | undefined): string {
  if (message === undefined) return '';
  if (/No such master with that name/i.test(message)) {
    return ' The Sentinels monitor no primary by the configured name: check the name option (SENTINEL MASTERS on a Sentinel lists the names it monitors).';
  }
  if (/WRONGPASS|NOAUTH|NOPERM|invalid (username-)?password/i.test(message)) {
    return " The Sentinels refused the credentials: check sentinelUsername and sentinelPassword (the primary's own are username and password).";
  }
  // ioredis' wording when every Sentinel dropped or refused the connection (the system's reason is lost).
  if (/All sentinels are unreachable.*Connection is closed/is.test(message)) {
    return ' None of the Sentinels answered: check their hosts and ports (26379 by default) and that they run.';
  }
  return '';
}

/**
 * ioredis' "Protocol error, got "H" as reply type byte": something listens there, but not Redis (an HTTP server or
 * proxy answers 'H', a TLS server an alert). Without this, the message read as a Redis that is down.
 */
function protocolHint(message: string | undefined): string {
  if (message === undefined || !/^Protocol error/.test(message)) return '';
  return ' Something listens at that address but does not speak the Redis protocol (an HTTP server or proxy answers "H"): check the port, and use tls (a rediss:// URL) if the server expects TLS.';
}
