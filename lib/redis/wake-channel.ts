import type { Logger } from '@nestjs/common';
import type { Handover, HandoverChannel, HandoverChannelState } from '../core/handover-channel';
import { CommandDeadlines } from './command-deadlines';
import { RedisClient, waitUntilReady } from './redis-connection';

export type { Handover } from '../core/handover-channel';

type Wake = (handover: Handover) => void;

/** @internal See `WakeChannel.state`. */
export type WakeChannelState = HandoverChannelState;

/**
 * The one pub/sub channel of a LockService, on one subscriber connection, subscribed once (at the
 * first wait) and kept until shutdown: no SUBSCRIBE/UNSUBSCRIBE per wait, no channel per key to
 * leak, no connection per waiter. A release that hands the lock to a waiter publishes
 * `<token> <fence> <lease ms> <place ms left> <lock key>` on the channel of that waiter's service only, so exactly one process
 * hears about each release.
 */
export class WakeChannel implements HandoverChannel {
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

  /**
   * @internal For health checks. `idle`: no wait has needed the channel yet (nothing to check);
   * `subscribed`: confirmed and its connection is up; `disconnected`: the subscriber connection is
   * down or its subscription failed, so waiters fall back to polling until it is back; `closed`.
   */
  get state(): WakeChannelState {
    if (this.closed) return 'closed';
    if (!this.connection) return 'idle';
    return this.confirmed && this.connection.status === 'ready' ? 'subscribed' : 'disconnected';
  }

  /**
   * Registers `wake` for the handover of the Redis key `lockName` to `token` (synchronous, before the
   * attempt is sent); returns the unregister function. One token serves every key of a multi-key
   * lock, so a handover is routed by both: a message about one key never wakes the wait for another.
   */
  register(token: string, lockName: string, wake: Wake): () => void {
    const id = handoverId(token, lockName);
    this.waiters.set(id, wake);
    return () => this.waiters.delete(id);
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

  close(): Promise<void> {
    this.closed = true;
    this.confirmed = false;
    this.signalClosed();
    this.waiters.clear();
    const connection = this.connection;
    this.connection = undefined;
    connection?.disconnect();
    return Promise.resolve();
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
    // Scripts see key names with the client's own keyPrefix (an ioredis option) in front.
    const clientPrefix = keyPrefixOf(this.source);
    connection.on('message', (_channel: string, message: string) => {
      const parsed = parseHandover(message, clientPrefix);
      if (parsed) this.waiters.get(handoverId(parsed.token, parsed.lockName))?.(parsed.handover);
    });
    this.connection = connection;
    return connection;
  }
}

const handoverId = (token: string, lockName: string): string => `${token} ${lockName}`;

/** `<token> <fence> <lease ms> <place ms left> <lock key>` (the key last: it may contain spaces). */
function parseHandover(message: string, clientPrefix: string): { token: string; lockName: string; handover: Handover } | undefined {
  const fields: string[] = [];
  let from = 0;
  for (let i = 0; i < 4; i++) {
    const space = message.indexOf(' ', from);
    if (space < 0) return undefined;
    fields.push(message.slice(from, space));
    from = space + 1;
  }
  let lockName = message.slice(from);
  if (clientPrefix && lockName.startsWith(clientPrefix)) lockName = lockName.slice(clientPrefix.length);
  const [token, fence, validFor, placeLeft] = fields;
  return { token, lockName, handover: { fence: Number(fence), validFor: Number(validFor), placeLeft: Number(placeLeft) } };
}

function keyPrefixOf(client: RedisClient): string {
  const options = (client as { options?: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } } }).options;
  return options?.keyPrefix ?? options?.redisOptions?.keyPrefix ?? '';
}
