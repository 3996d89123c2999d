/**
 * What one LockService keeps in memory and on Redis, counted from outside: the resource-bounds suite
 * compares these counts after a warm-up and after ten times more calls, so anything that grows with
 * the number of calls (instead of with what is held or waiting now) shows up as a difference.
 * Private fields are read through `any` on purpose: they are what a leak would fill.
 */
import { getEventListeners } from 'node:events';
import type Redis from 'ioredis';
import type { LockService } from '../../../../lib';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** In-process structures of one service; every entry is what a quiet service must be back to. */
export interface EngineCensus {
  /** Locks adopted and not yet released or lost (ShutdownDrain). */
  held: number;
  /** Acquisitions in flight (ShutdownDrain). */
  acquiring: number;
  /** Locks the watchdog renews or watches for their deadline. */
  watched: number;
  /** Handover listeners registered on the wake channel(s) (one per waiting key, per node in Redlock). */
  handoverListeners: number;
  /** Steps the wake channel(s) end at close(). */
  untilClose: number;
  /** Timers the wake channel(s) keep (sharded re-subscriptions). */
  channelTimers: number;
  /** Redis calls bounded by CommandDeadlines still listed (settled ones leave as the list moves on). */
  listedCalls: number;
  /** Redlock: tickets of acquisitions (RedlockTickets); 0 on a single Redis. */
  tickets: number;
  /** 'abort' listeners on the service's shutdown signal. */
  shutdownListeners: number;
  /** Listeners on every ioredis connection of the service, by connection and event (`main:ready` …). */
  listeners: Record<string, number>;
}

const deadlinesLength = (deadlines: any): number => {
  let n = 0;
  for (let call = deadlines?.head; call; call = call.next) n++;
  return n;
};

const listenersOf = (label: string, client: any, into: Record<string, number>): void => {
  if (!client) return;
  for (const event of client.eventNames() as Array<string | symbol>) into[`${label}:${String(event)}`] = client.listenerCount(event);
};

export function engineCensus(service: LockService): EngineCensus {
  const engine = service.engine as any;
  const store = engine.store;
  const channel = engine.wakeChannel;
  // Redlock: one WakeChannel per node behind the RedlockWakeChannel; a single Redis: the channel itself.
  const channels: any[] = channel.channels ?? [channel];
  const nodes: any[] = store.nodes ?? [];
  const listeners: Record<string, number> = {};
  if (nodes.length === 0) listenersOf('main', store.client, listeners);
  nodes.forEach((node, i) => listenersOf(`node${i}`, node.client, listeners));
  channels.forEach((c, i) => listenersOf(`subscriber${i}`, c.connection, listeners));
  const sum = (f: (c: any) => number) => channels.reduce((n, c) => n + f(c), 0);
  return {
    held: engine.drain.locks.size,
    acquiring: engine.drain.acquiring,
    watched: engine.watchdog.locks.size,
    handoverListeners: sum((c) => c.waiters.size),
    untilClose: sum((c) => c.untilClose.size),
    channelTimers: sum((c) => c.timers.size),
    listedCalls: nodes.length === 0 ? deadlinesLength(store.deadlines) : nodes.reduce((n, node) => n + deadlinesLength(node.deadlines), 0),
    tickets: store.tickets?.tickets.size ?? 0,
    shutdownListeners: getEventListeners(engine.shutdown.signal, 'abort').length,
    listeners,
  };
}

/** Timers and handles of this process, by kind (`Timeout`, `TCPSocketWrap`, …). */
export function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/** Keys under `prefix` on one Redis, by the lock name they belong to (`lock`, `fence`, `queue`, `waiters`, `other`). */
export interface KeyCensus {
  byKind: Record<string, number>;
  /** Keys without an expiry (PTTL -1), by name. */
  withoutTtl: string[];
  /** Longest PTTL seen of a fence key (ms). */
  longestFenceTtl: number;
}

const kindOf = (name: string): string => {
  if (name.endsWith('}')) return 'lock';
  if (name.endsWith('}:f')) return 'fence';
  if (name.endsWith('}:q')) return 'queue';
  if (name.endsWith('}:w')) return 'waiters';
  return 'other';
};

export async function keyCensus(client: Redis, prefix: string): Promise<KeyCensus> {
  const byKind: Record<string, number> = {};
  const withoutTtl: string[] = [];
  let longestFenceTtl = 0;
  let cursor = '0';
  do {
    const [next, names] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (names.length === 0) continue;
    const pipeline = client.pipeline();
    for (const name of names) pipeline.pttl(name);
    const ttls = (await pipeline.exec())!.map(([, ttl]) => Number(ttl));
    names.forEach((name, i) => {
      const kind = kindOf(name);
      byKind[kind] = (byKind[kind] ?? 0) + 1;
      if (ttls[i] === -1) withoutTtl.push(name);
      if (kind === 'fence') longestFenceTtl = Math.max(longestFenceTtl, ttls[i]);
    });
  } while (cursor !== '0');
  return { byKind, withoutTtl, longestFenceTtl };
}

/** Channels under `prefix` with at least one subscriber, and the subscriber count of each. */
export async function channelCensus(client: Redis, prefix: string): Promise<Record<string, number>> {
  const channels = (await client.pubsub('CHANNELS', `${prefix}*`)) as string[];
  if (channels.length === 0) return {};
  const flat = (await client.pubsub('NUMSUB', ...channels)) as Array<string | number>;
  const counts: Record<string, number> = {};
  for (let i = 0; i < flat.length; i += 2) counts[String(flat[i])] = Number(flat[i + 1]);
  return counts;
}

/** Client connections the server has open (CLIENT LIST), our own inspecting one included. */
export async function connectedClients(client: Redis): Promise<number> {
  const list = (await client.client('LIST')) as string;
  return list.split('\n').filter((line) => line.trim() !== '').length;
}
