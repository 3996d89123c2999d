/**
 * Network faults between the library and Redis without root or `tc netem` (unavailable here):
 * point the client at the proxy and add latency, drop traffic, or reset connections.
 *
 * Jitter (a random delay per chunk, drawn for each connection and direction separately) keeps the
 * byte order within a connection, like TCP, but not across connections: a client's pub/sub
 * messages (one connection) and its command replies (another) reach it reordered relative to each
 * other, as they can on a real network. stats() shows that it happened.
 */
import * as net from 'net';

/** What the proxy did to the traffic, so a test can prove its fault fired. */
export interface ProxyStats {
  /** Chunks forwarded, both directions, all connections. */
  chunks: number;
  /** Sum and maximum of the delay added to a chunk (due time minus arrival, ms). */
  addedMs: number;
  maxAddedMs: number;
  /** Chunks forwarded after a chunk that arrived later on another connection or direction. */
  overtaken: number;
  /** Connections recognised as pub/sub subscribers (they sent SUBSCRIBE). */
  subscribers: number;
  /** Pub/sub messages lost in flight by loseNextPubSubMessage (each with its connection reset). */
  lostPubSubMessages: number;
}

/**
 * Bytes waiting to be forwarded in one direction. A FIFO drained by one timer for its head keeps
 * them in order even when the delay is lowered while chunks are queued.
 */
class Pipe {
  private readonly queue: Array<{ due: number; chunk: Buffer; seq: number }> = [];
  private timer?: NodeJS.Timeout;
  private ending = false;
  /** Due time of the last chunk queued: a later chunk is never due before it (byte order). */
  private lastDue = 0;
  /** Set once a chunk was dropped: the byte stream through this pair is no longer trustworthy. */
  dropped = false;

  constructor(
    private readonly proxy: TcpProxy,
    private readonly to: net.Socket,
    /** True for the direction that carries pub/sub messages to a subscriber (the subscriber delay applies). */
    private readonly carriesPubSub: () => boolean,
  ) {}

  push(chunk: Buffer): void {
    if (this.proxy.isBlackholed()) {
      this.dropped = true;
      return;
    }
    const now = Date.now();
    const extra = this.carriesPubSub() ? this.proxy.subscriberDelayMs() : 0;
    // A chunk leaves once the one ahead of it did and its own delay is over, then takes its time on the wire.
    const due = Math.max(this.lastDue, now + this.proxy.delayMs() + this.proxy.jitterSample() + extra) + this.proxy.wireMs(chunk.length);
    this.lastDue = due;
    this.proxy.noteQueued(due - now);
    this.queue.push({ due, chunk, seq: this.proxy.nextSeq() });
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
      else if (!this.to.destroyed) {
        this.proxy.noteForwarded(head.seq);
        this.to.write(head.chunk);
      }
    }
    // While blackholed even the FIN is held back; blackhole(false) kicks every pipe again.
    if (this.ending && !this.proxy.isBlackholed() && !this.to.destroyed) this.to.end();
  }
}

interface Pair {
  /** Set once the client sent SUBSCRIBE on it: this connection carries pub/sub messages. */
  subscriber: boolean;
  /** Client chunks inspected for SUBSCRIBE so far (only the first few are: the handshake). */
  sniffed: number;
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

/** A SUBSCRIBE comes right after the connection's handshake (ioredis: INFO, maybe SELECT/CLIENT). */
const SNIFF_CHUNKS = 4;
const SUBSCRIBE = /subscribe/i;

export class TcpProxy {
  private readonly pairs = new Set<Pair>();
  private delay = 0;
  private jitter = 0;
  private subscriberDelay = 0;
  /** Bytes per second each direction of each connection carries; 0: no limit. */
  private bandwidth = 0;
  private holed = false;
  private losePubSub = false;
  private seq = 0;
  private maxForwardedSeq = 0;
  private readonly counters: ProxyStats = { chunks: 0, addedMs: 0, maxAddedMs: 0, overtaken: 0, subscribers: 0, lostPubSubMessages: 0 };
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
   * Adds a random delay, uniform in [0, ms), to every chunk, drawn per chunk, so each connection and
   * direction gets its own delays. Order within one direction of one connection is kept (a chunk is
   * never due before the one queued ahead of it); order across connections is not.
   */
  setJitter(ms: number): void {
    this.jitter = Math.max(0, ms);
  }

  /**
   * Extra delay for what Redis sends on subscriber connections (pub/sub messages), on top of the
   * other delays: a slow pub/sub path while command replies stay fast.
   */
  setSubscriberDelay(ms: number): void {
    this.subscriberDelay = Math.max(0, ms);
  }

  /**
   * Each direction of each connection carries at most `bytesPerSecond` (0: no limit): a chunk takes
   * its length ÷ the rate on the wire, behind the chunks queued ahead of it. A slow link, where the
   * time a command takes grows with its size.
   */
  setBandwidth(bytesPerSecond: number): void {
    this.bandwidth = Math.max(0, bytesPerSecond);
  }

  /**
   * The next thing Redis sends on a subscriber connection (a pub/sub message, once subscribed) is
   * lost in flight and that connection is reset: a message gone with a connection that broke under
   * it. Only that one message; the client reconnects and resubscribes as it would in production.
   */
  loseNextPubSubMessage(): void {
    this.losePubSub = true;
  }

  /** Counters since start (a copy). */
  stats(): ProxyStats {
    return { ...this.counters };
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

  /** @internal used by Pipe */
  jitterSample(): number {
    return this.jitter > 0 ? Math.random() * this.jitter : 0;
  }

  /** @internal used by Pipe: how long `bytes` take on the wire at the bandwidth set. */
  wireMs(bytes: number): number {
    return this.bandwidth > 0 ? (bytes * 1000) / this.bandwidth : 0;
  }

  /** @internal used by Pipe */
  subscriberDelayMs(): number {
    return this.subscriberDelay;
  }

  /** @internal used by Pipe: one sequence over every pipe, in arrival order. */
  nextSeq(): number {
    return ++this.seq;
  }

  /** @internal used by Pipe */
  noteQueued(addedMs: number): void {
    this.counters.addedMs += addedMs;
    if (addedMs > this.counters.maxAddedMs) this.counters.maxAddedMs = addedMs;
  }

  /** @internal used by Pipe: a chunk leaves; it was overtaken if one that arrived after it already left. */
  noteForwarded(seq: number): void {
    this.counters.chunks++;
    if (seq < this.maxForwardedSeq) this.counters.overtaken++;
    else this.maxForwardedSeq = seq;
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
      subscriber: false,
      sniffed: 0,
      client,
      upstream,
      toUpstream: new Pipe(this, upstream, () => false),
      toClient: new Pipe(this, client, () => pair.subscriber),
    };
    this.pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      if (!pair.subscriber && pair.sniffed < SNIFF_CHUNKS) {
        pair.sniffed++;
        if (SUBSCRIBE.test(chunk.toString('latin1'))) {
          pair.subscriber = true;
          this.counters.subscribers++;
        }
      }
      pair.toUpstream.push(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.losePubSub && pair.subscriber) {
        this.losePubSub = false;
        this.counters.lostPubSubMessages++;
        this.closePair(pair, true);
        return;
      }
      pair.toClient.push(chunk);
    });
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
