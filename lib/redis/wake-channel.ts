import type { Logger } from '@nestjs/common';
import { CommandDeadlines } from '../internal/command-deadlines';
import { RedisClient, waitUntilReady } from './redis-connection';

/** A release handed the lock to this waiter: its fencing token and the lease (ms) it was given. */
export interface Handover {
  fence: number;
  validFor: number;
}

type Wake = (handover: Handover) => void;

/**
 * The one pub/sub channel of a LockService, on one subscriber connection, subscribed once (at the
 * first wait) and kept until shutdown: no SUBSCRIBE/UNSUBSCRIBE per wait, no channel per key to
 * leak, no connection per waiter. A release that hands the lock to a waiter publishes
 * `<token> <fence> <lease ms>` on the channel of that waiter's service only, so exactly one process
 * hears about each release.
 */
export class WakeChannel {
  private connection?: RedisClient;
  private subscribing?: Promise<void>;
  private confirmed = false;
  private readonly waiters = new Map<string, Wake>();
  private closed = false;
  private readonly onClose: Promise<void>;
  private signalClosed!: () => void;
  private readonly deadlines: CommandDeadlines;

  constructor(
    private readonly source: RedisClient,
    readonly name: string,
    private readonly commandTimeout: number,
    private readonly logger: Logger,
  ) {
    this.onClose = new Promise<void>((resolve) => (this.signalClosed = resolve));
    this.deadlines = new CommandDeadlines(commandTimeout);
  }

  /** True once Redis acknowledged the subscription: from then on a release reaches registered waiters. */
  get subscribed(): boolean {
    return this.confirmed;
  }

  /** Registers `wake` for the handover to `token` (synchronous, before the attempt is sent); returns the unregister function. */
  register(token: string, wake: Wake): () => void {
    this.waiters.set(token, wake);
    return () => this.waiters.delete(token);
  }

  /** Subscribes once per service; true when confirmed, false when it failed (waiters then poll) or the service closed. */
  async ensureSubscribed(): Promise<boolean> {
    if (this.confirmed || this.closed) return this.confirmed;
    try {
      this.subscribing ??= this.subscribe();
      // Shutdown must not wait for a subscription that may never be answered.
      await Promise.race([this.subscribing, this.onClose]);
      this.confirmed = !this.closed;
    } catch (error) {
      this.subscribing = undefined; // the next waiter tries again
      this.logger.debug?.(`Subscribing to ${this.name} failed, waiting by polling: ${(error as Error).message}`);
    }
    return this.confirmed;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.confirmed = false;
    this.signalClosed();
    this.waiters.clear();
    const connection = this.connection;
    this.connection = undefined;
    connection?.disconnect();
  }

  private subscribe(): Promise<void> {
    const connection = this.connect();
    return this.deadlines.bound('subscribe', async () => {
      // Our own connections do not queue commands while connecting, so wait for the handshake first.
      if (!(await waitUntilReady(connection, this.commandTimeout))) throw new Error('subscriber connection not ready');
      await connection.subscribe(this.name);
    });
  }

  private connect(): RedisClient {
    if (this.connection) return this.connection;
    const connection = this.source.duplicate();
    connection.on('error', (error: Error) => this.logger.debug?.(`Subscriber connection: ${error.message}`));
    connection.on('message', (_channel: string, message: string) => {
      const [token, fence, validFor] = message.split(' ');
      this.waiters.get(token)?.({ fence: Number(fence), validFor: Number(validFor) });
    });
    this.connection = connection;
    return connection;
  }
}
