import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import Database from 'better-sqlite3';
import { setTimeout as sleep, setImmediate as yieldToEventLoop } from 'timers/promises';
import type { AppConfig } from '../config/app-config';
import { SCHEMA } from './schema';

/** Opens the shared file the way several processes can write it at once. */
export function openDatabase(path: string): Database.Database {
  const db = new Database(path);
  // First: every later statement (even switching to WAL) may meet another instance's write lock.
  db.pragma('busy_timeout = 10000');
  // Readers never block the writer and vice versa; NORMAL sync is durable enough for WAL.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(SCHEMA);
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
