/**
 * Network faults between the library and Redis without root or `tc netem` (unavailable here):
 * point the client at the proxy and add latency, drop traffic, or reset connections.
 */
import * as net from 'net';

/**
 * Bytes waiting to be forwarded in one direction. A FIFO drained by one timer for its head keeps
 * them in order even when the delay is lowered while chunks are queued.
 */
class Pipe {
  private readonly queue: Array<{ due: number; chunk: Buffer }> = [];
  private timer?: NodeJS.Timeout;
  private ending = false;
  /** Set once a chunk was dropped: the byte stream through this pair is no longer trustworthy. */
  dropped = false;

  constructor(
    private readonly proxy: TcpProxy,
    private readonly to: net.Socket,
  ) {}

  push(chunk: Buffer): void {
    if (this.proxy.isBlackholed()) {
      this.dropped = true;
      return;
    }
    this.queue.push({ due: Date.now() + this.proxy.delayMs(), chunk });
    this.pump();
  }

  /** The sender closed its side: forward what is still queued, then close ours (a clean FIN). */
  end(): void {
    this.ending = true;
    this.pump();
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  /** Forwards whatever is due now; called on every push and when the blackhole lifts. */
  pump(): void {
    if (this.timer) return;
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const wait = head.due - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        return;
      }
      this.queue.shift();
      if (this.proxy.isBlackholed()) this.dropped = true;
      else if (!this.to.destroyed) this.to.write(head.chunk);
    }
    // While blackholed even the FIN is held back; blackhole(false) kicks every pipe again.
    if (this.ending && !this.proxy.isBlackholed() && !this.to.destroyed) this.to.end();
  }
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  toUpstream: Pipe;
  toClient: Pipe;
}

function reset(socket: net.Socket): void {
  if (socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    // Not connected yet or already torn down: a plain destroy is all that is left.
    socket.destroy();
  }
}

export class TcpProxy {
  private readonly pairs = new Set<Pair>();
  private delay = 0;
  private holed = false;
  private stopping?: Promise<void>;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    readonly targetPort: number,
    readonly targetHost: string,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as net.AddressInfo;
    const proxy = new TcpProxy(server, port, targetPort, targetHost);
    server.on('connection', (client) => proxy.accept(client));
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Open connection pairs (client side + upstream side). */
  get connections(): number {
    return this.pairs.size;
  }

  /** Every chunk, both directions, is forwarded `ms` after it arrived (order kept per direction). */
  setDelay(ms: number): void {
    this.delay = Math.max(0, ms);
  }

  /**
   * On: connections are still accepted, everything read is dropped, nothing is sent, both ways.
   * Off: traffic flows again, but every pair that lost bytes is reset first. Redis speaks a
   * request/reply stream; after a gap, replies would be matched to the wrong commands, which no
   * real network does (TCP retransmits or the connection dies), so the harness kills it instead.
   */
  blackhole(on: boolean): void {
    this.holed = on;
    if (on) return;
    for (const pair of [...this.pairs]) {
      if (pair.toUpstream.dropped || pair.toClient.dropped) {
        this.closePair(pair, true);
      } else {
        pair.toUpstream.pump();
        pair.toClient.pump();
      }
    }
  }

  /** Destroys every open pair with a TCP RST on both sides (the client sees ECONNRESET). */
  resetAll(): void {
    for (const pair of [...this.pairs]) this.closePair(pair, true);
  }

  /** Closes the listener and every connection, clears every timer. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const pair of [...this.pairs]) this.closePair(pair, false);
    });
    return this.stopping;
  }

  /** @internal used by Pipe */
  isBlackholed(): boolean {
    return this.holed;
  }

  /** @internal used by Pipe */
  delayMs(): number {
    return this.delay;
  }

  private accept(client: net.Socket): void {
    if (this.stopping) {
      client.destroy();
      return;
    }
    const upstream = net.connect({ port: this.targetPort, host: this.targetHost });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const pair: Pair = {
      client,
      upstream,
      toUpstream: new Pipe(this, upstream),
      toClient: new Pipe(this, client),
    };
    this.pairs.add(pair);
    client.on('data', (chunk: Buffer) => pair.toUpstream.push(chunk));
    upstream.on('data', (chunk: Buffer) => pair.toClient.push(chunk));
    // Errors (ECONNREFUSED upstream, ECONNRESET) are the faults under test, not harness failures;
    // 'close' below carries them to the other side.
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    // A clean close (FIN) is passed on after the bytes still queued for that direction; a side
    // that dies abruptly is passed on as a reset (e.g. upstream refused -> the client sees a reset).
    client.on('end', () => pair.toUpstream.end());
    upstream.on('end', () => pair.toClient.end());
    const onClose = (hadError: boolean) => {
      if (hadError) this.closePair(pair, true);
      else if (client.destroyed && upstream.destroyed) this.closePair(pair, false);
    };
    client.on('close', onClose);
    upstream.on('close', onClose);
  }

  private closePair(pair: Pair, abrupt: boolean): void {
    if (!this.pairs.delete(pair)) return;
    pair.toUpstream.clear();
    pair.toClient.clear();
    if (abrupt) {
      reset(pair.client);
      reset(pair.upstream);
    } else {
      pair.client.destroy();
      pair.upstream.destroy();
    }
  }
}
