/**
 * Closing ioredis clients without leaving anything running. ioredis quirk (5.x): disconnect() on a
 * client whose socket is already gone (server killed, connection reset, status 'reconnecting')
 * never emits 'end' and leaves a ref'd `disconnectTimeout` timer (default 2 s) that keeps jest
 * alive and shows up in --detectOpenHandles. So harness clients get a short disconnectTimeout and
 * closeClient() waits that timer out in exactly that case.
 */
import Redis, { RedisOptions } from 'ioredis';

/** Added to every harness client's options (callers can override). */
export const HARNESS_CLIENT_DEFAULTS: RedisOptions = {
  maxRetriesPerRequest: 1,
  disconnectTimeout: 100,
};

/** disconnect(), not quit(): quit would wait for a reply from a server that may be frozen or gone. */
export async function closeClient(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'wait') {
    // lazyConnect and never connected: ioredis ends it synchronously, no socket, no timer.
    client.disconnect();
    return;
  }
  const timeoutMs = client.options.disconnectTimeout ?? 2_000;
  const socketGone = !client.stream || client.stream.destroyed;
  const ended = new Promise<void>((resolve) => {
    // ioredis destroys a socket that has not closed within disconnectTimeout; a little more covers it.
    const timer = setTimeout(resolve, timeoutMs + 50);
    client.once('end', () => {
      // With a dead socket ioredis' own timer is still pending: let it fire before returning.
      if (socketGone) return;
      clearTimeout(timer);
      resolve();
    });
  });
  client.disconnect();
  await ended;
}

/** The clients one server handed out, closed together by its stop(). */
export class ClientSet {
  private readonly clients = new Set<Redis>();

  add(client: Redis): Redis {
    // Tests assert on errors with their own listeners; without any listener ioredis prints
    // "[ioredis] Unhandled error event" for every expected fault (kill, pause, reset).
    client.on('error', () => undefined);
    client.once('end', () => this.clients.delete(client));
    this.clients.add(client);
    return client;
  }

  async closeAll(): Promise<void> {
    const all = [...this.clients];
    this.clients.clear();
    await Promise.all(all.map(closeClient));
  }
}
