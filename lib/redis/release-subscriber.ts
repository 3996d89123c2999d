import type { Logger } from '@nestjs/common';
import { withTimeout } from '../internal/with-timeout';
import { RedisClient, waitUntilReady } from './redis-connection';

type Wake = () => void;

/**
 * One subscriber connection per service, shared by every waiter. Subscriptions are counted per
 * channel and dropped with the last waiter, so channels never leak. A release publishes the token
 * of the next waiter only; every other waiter on the channel ignores the message (no thundering herd).
 */
export class ReleaseSubscriber {
  private connection?: RedisClient;
  private readonly listeners = new Map<string, Map<string, Wake>>();
  private readonly pending = new Map<string, Promise<void>>();
  private closed = false;
  private readonly onClose: Promise<void>;
  private signalClosed!: () => void;

  constructor(
    private readonly source: RedisClient,
    private readonly commandTimeout: number,
    private readonly logger: Logger,
  ) {
    this.onClose = new Promise<void>((resolve) => (this.signalClosed = resolve));
  }

  /**
   * Registers `wake` for messages naming `token` on `channel`. Resolves true once Redis confirmed
   * the subscription (from then on no release can be missed), false when it could not be confirmed
   * (the waiter then falls back to polling). The returned function unregisters.
   */
  async listen(channel: string, token: string, wake: Wake): Promise<{ confirmed: boolean; stop: () => void }> {
    let waiters = this.listeners.get(channel);
    if (!waiters) this.listeners.set(channel, (waiters = new Map()));
    waiters.set(token, wake);
    const stop = () => this.unlisten(channel, token);
    if (this.closed) return { confirmed: false, stop };
    try {
      if (!this.pending.has(channel)) this.pending.set(channel, this.subscribe(channel));
      // Shutdown must not wait for a subscription that may never be answered.
      await Promise.race([this.pending.get(channel), this.onClose]);
      return { confirmed: !this.closed, stop };
    } catch (error) {
      this.pending.delete(channel);
      this.logger.debug?.(`Subscription to ${channel} failed, waiting by polling: ${(error as Error).message}`);
      return { confirmed: false, stop };
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.signalClosed();
    this.listeners.clear();
    this.pending.clear();
    const connection = this.connection;
    this.connection = undefined;
    connection?.disconnect();
  }

  private subscribe(channel: string): Promise<void> {
    const connection = this.connect();
    return withTimeout('subscribe', this.commandTimeout, async () => {
      // Our own connections do not queue commands while connecting, so wait for the handshake first.
      if (!(await waitUntilReady(connection, this.commandTimeout))) throw new Error('subscriber connection not ready');
      await connection.subscribe(channel);
    });
  }

  private unlisten(channel: string, token: string): void {
    const waiters = this.listeners.get(channel);
    if (!waiters) return;
    waiters.delete(token);
    if (waiters.size > 0) return;
    this.listeners.delete(channel);
    const pending = this.pending.get(channel);
    this.pending.delete(channel);
    const connection = this.connection;
    if (!connection || this.closed) return;
    // Unsubscribe after the subscribe settled, and only if nobody re-listened meanwhile.
    void (pending ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        if (!this.listeners.has(channel) && connection.status === 'ready') return connection.unsubscribe(channel);
      })
      .catch(() => undefined);
  }

  private connect(): RedisClient {
    if (this.connection) return this.connection;
    const connection = this.source.duplicate();
    connection.on('error', (error: Error) => this.logger.debug?.(`Subscriber connection: ${error.message}`));
    connection.on('message', (channel: string, message: string) => this.listeners.get(channel)?.get(message)?.());
    this.connection = connection;
    return connection;
  }
}
