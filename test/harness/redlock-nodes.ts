/**
 * N independent redis-servers for the Redlock suites, each reached through its own TCP proxy (so a
 * test can partition or slow one node), started on free ports and stopped together.
 */
import type Redis from 'ioredis';
import { RedisProcess } from './redis-process';
import { TcpProxy } from './tcp-proxy';

export class RedlockNodes {
  private constructor(
    readonly servers: RedisProcess[],
    readonly proxies: TcpProxy[],
  ) {}

  static async start(count: number): Promise<RedlockNodes> {
    const servers = await Promise.all(Array.from({ length: count }, () => RedisProcess.start()));
    const proxies = await Promise.all(servers.map((s) => TcpProxy.start(s.port)));
    return new RedlockNodes(servers, proxies);
  }

  /** URLs the library connects to: through the proxies. */
  get urls(): string[] {
    return this.proxies.map((p) => p.url);
  }

  /**
   * URLs of the servers themselves, for cases that put no fault on the links. The proxies run in the test
   * process: when its event loop stalls past a node's per-node bound (ttl / 10), a healthy node's reply
   * waits in the proxy as well as in the library, and the vote is lost (loaded machines: "0 of 3 answered
   * within 300 ms" with 306-428 ms stalls measured).
   */
  get directUrls(): string[] {
    return this.servers.map((s) => s.url);
  }

  /** Direct clients (not through a proxy), one per server, closed by stop(). */
  clients(): Redis[] {
    return this.servers.map((s) => s.client());
  }

  /** Every server running, unpaused, unproxied-faults cleared: the next case starts healthy. */
  async heal(): Promise<void> {
    for (const p of this.proxies) {
      p.blackhole(false);
      p.setDelay(0);
    }
    for (const s of this.servers) {
      try {
        s.resume();
      } catch {
        await s.restart(); // killed by the case
      }
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.proxies.map((p) => p.stop()));
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}
