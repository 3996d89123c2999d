/**
 * A deferring `@Locked` method declared once on an abstract base class and inherited by two providers: the
 * shape of test/unit/testing-module-defer-inheritance.spec.ts (in process) and
 * test/e2e/locked-defer-inheritance.spec.ts (BullMQ). Each run says which instance it ran on.
 */
import { Injectable } from '@nestjs/common';
import { currentLock, Deferred, Locked } from '../../lib';

/** One run of Importer.run's body: the instance (`this`) it ran on, what `this.source()` said, and its lock. */
export interface ImporterRun {
  readonly self: object;
  readonly source: string;
  readonly id: string;
  readonly fencingToken: number;
}

export const importerRuns: ImporterRun[] = [];

export abstract class Importer {
  abstract source(): string;

  @Locked('import:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    importerRuns.push({ self: this, source: this.source(), id, fencingToken: currentLock()!.fencingToken });
    return `${this.source()} ${id}`;
  }
}

@Injectable()
export class GithubImporter extends Importer {
  source(): string {
    return 'github';
  }
}

@Injectable()
export class GitlabImporter extends Importer {
  source(): string {
    return 'gitlab';
  }
}

/** A job as versions before jobs named the provider's class stored it: named by the class that declares the method. */
export const EARLIER_VERSION_JOB_NAME = 'Importer.run';
