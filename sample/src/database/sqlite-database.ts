import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import Database from 'better-sqlite3';
import { setTimeout as sleep, setImmediate as yieldToEventLoop } from 'timers/promises';
import type { AppConfig } from '../config/app-config';
import { SCHEMA } from './schema';

/** How long opening the shared file waits for other instances that are opening it too. */
const OPEN_BUSY_MS = 10_000;

/**
 * Runs `step` again while SQLite answers SQLITE_BUSY, for up to `ms`. The busy timeout covers most
 * waits, but switching a file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once,
 * without waiting, when another process is doing the same at that moment: three instances started
 * together met it (one exited with "database is locked").
 */
export function whileBusy<T>(step: () => T, ms = OPEN_BUSY_MS): T {
  const until = Date.now() + ms;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    try {
      return step();
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= until) throw error;
      // Opening happens in a constructor (synchronous): block this process only, for a few ms.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause);
    }
  }
}

/** Opens the shared file the way several processes can write it at once. */
export function openDatabase(path: string): Database.Database {
  const db = new Database(path);
  // First: every later statement (even switching to WAL) may meet another instance's write lock.
  db.pragma(`busy_timeout = ${OPEN_BUSY_MS}`);
  // Readers never block the writer and vice versa; NORMAL sync is durable enough for WAL.
  whileBusy(() => db.pragma('journal_mode = WAL'));
  db.pragma('synchronous = NORMAL');
  whileBusy(() => db.exec(SCHEMA));
  return db;
}

/**
 * The connection of this instance. better-sqlite3 is synchronous; `roundTrip()` gives back the
 * await that a driver talking to a database server (or an ORM) has between statements, which is
 * where other requests — and other instances — get in.
 */
@Injectable()
export class SqliteDatabase implements OnApplicationShutdown {
  readonly db: Database.Database;
  private readonly latencyMs: number;

  constructor(config: ConfigService<AppConfig, true>) {
    this.db = openDatabase(config.get('DB_PATH', { infer: true }));
    this.latencyMs = config.get('DB_LATENCY_MS', { infer: true });
  }

  roundTrip(): Promise<unknown> {
    return this.latencyMs > 0 ? sleep(this.latencyMs) : yieldToEventLoop();
  }

  onApplicationShutdown(): void {
    this.db.close();
  }
}
