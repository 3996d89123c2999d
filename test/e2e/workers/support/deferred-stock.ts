/**
 * A deferring method shared by the test process and the defer-stock worker process: the same class name
 * (`Stock.write`), so a job enqueued by one instance runs on whichever instance's worker takes it. It writes
 * to a fenced store (accepted only with a token above every earlier one) after `stallMs` of "work".
 */
import { Inject, Injectable } from '@nestjs/common';
import type Redis from 'ioredis';
import { Deferred, Locked, currentLock } from '../../../../lib';
import { fencedWrite } from './fenced-store';

export const STOCK_IO = Symbol('stock-io');

export interface StockIo {
  readonly client: Redis;
  readonly stallMs: number;
  /** Every run fails right after it started (a store that refuses the write). */
  readonly refuse?: boolean;
  report(line: Record<string, unknown>): void;
}

@Injectable()
export class Stock {
  constructor(@Inject(STOCK_IO) private readonly io: StockIo) {}

  @Locked('stock:<0>', { onBusy: 'defer', ttl: 600 })
  async write(item: string, value: string): Promise<boolean | Deferred> {
    const token = currentLock()!.fencingToken;
    this.io.report({ event: 'started', token, value, pid: process.pid });
    if (this.io.refuse) throw new Error('the store refused the write');
    await new Promise((resolve) => setTimeout(resolve, this.io.stallMs));
    const accepted = await fencedWrite(this.io.client, `store:${item}`, token, `${value}@${process.pid}`);
    this.io.report({ event: 'wrote', token, accepted, pid: process.pid });
    return accepted;
  }
}
