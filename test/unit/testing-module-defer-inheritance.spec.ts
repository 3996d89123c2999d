/**
 * A deferring `@Locked` method inherited from a base class (docs/defer.md), under the testing module: a job is
 * named after the class of the instance that deferred the call and runs on that instance, so several providers
 * may extend one base. Jobs of earlier versions, named by the declaring class, run when one provider inherits
 * the method and fail when several do. The same on BullMQ: test/e2e/locked-defer-inheritance.spec.ts.
 */
import 'reflect-metadata';
import { Injectable, INestApplicationContext, Logger, Module, type Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Deferred, DistributedLockError, Locked, LockService, type DistributedLockModuleOptions } from '../../lib';
import { deferQueueOf } from '../../lib/defer/defer-queue';
import { deferredMethodsOf } from '../../lib/defer/deferred-methods';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { EARLIER_VERSION_JOB_NAME, GithubImporter, GitlabImporter, Importer, importerRuns } from '../shared/inherited-deferring-methods';

/** What the bodies below ran, in order. */
const calls: string[] = [];

/** A base with a deferring method, overridden by a subclass that adds its own step and calls super (not deferring itself). */
@Injectable()
class BaseSync {
  @Locked('sync:<0>', { onBusy: 'defer' })
  async sync(id: string): Promise<string | Deferred> {
    calls.push(`base ${id}`);
    return 'synced';
  }
}

@Injectable()
class AuditedSync extends BaseSync {
  override async sync(id: string): Promise<string | Deferred> {
    calls.push(`override ${id}`);
    return super.sync(id);
  }
}

/** A deferring method overridden by another deferring one (its own key) that calls super: two declarations, two job names. */
@Injectable()
class Ledger {
  @Locked('ledger:<0>', { onBusy: 'defer' })
  async post(id: string): Promise<string | Deferred> {
    calls.push(`ledger ${this.constructor.name} ${id}`);
    return 'posted';
  }
}

@Injectable()
class AuditedLedger extends Ledger {
  @Locked('audit:<0>', { onBusy: 'defer' })
  override async post(id: string): Promise<string | Deferred> {
    calls.push(`audit ${id}`);
    return super.post(id);
  }
}

/** Two distinct classes both named `Worker` (one per call), as two modules may each declare one. */
function workerClass() {
  @Injectable()
  class Worker {
    @Locked('worker:<0>', { onBusy: 'defer' })
    async run(id: string): Promise<string | Deferred> {
      return id;
    }
  }
  return Worker;
}

describe('onBusy defer on a method inherited from a base class (testing module)', () => {
  const apps: INestApplicationContext[] = [];

  beforeEach(() => {
    calls.length = 0;
    importerRuns.length = 0;
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function start(providers: Provider[], options: DistributedLockModuleOptions = { defer: { backoff: 10 } }) {
    @Module({ imports: [DistributedLockTestingModule.forRoot(options)], providers })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    apps.push(app);
    return { app, testing: app.get(LockTestingController) };
  }

  async function startupError(providers: Provider[]): Promise<unknown> {
    @Module({ imports: [DistributedLockTestingModule.forRoot({ defer: {} })], providers })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const error = await moduleRef.init().then(
      () => undefined,
      (e: unknown) => e,
    );
    await moduleRef.close().catch(() => undefined); // close() rethrows the failed init, after closing
    return error;
  }

  /** Enqueues a job as a version that named jobs by the declaring class did: `Importer.run`, whichever provider deferred it. */
  function enqueueAsEarlierVersion(app: INestApplicationContext, instance: Importer, id: string): Promise<Deferred> {
    const [method] = deferredMethodsOf(instance);
    return deferQueueOf(app.get(LockService))!.enqueue({ name: EARLIER_VERSION_JOB_NAME, instance, method }, [id]);
  }

  it('two providers extending one base: each busy call is a job named after its own class, run on that instance under the lock', async () => {
    const { app, testing } = await start([GithubImporter, GitlabImporter]);
    const github = app.get(GithubImporter);
    const gitlab = app.get(GitlabImporter);
    const other = testing.hold('import:1');

    const answers = [await github.run('1'), await gitlab.run('1')];
    expect(answers.map((a) => (a as Deferred).method)).toEqual(['GithubImporter.run', 'GitlabImporter.run']);
    expect(importerRuns).toEqual([]); // the key is held elsewhere: nothing ran yet

    other.release();
    expect(await testing.deferredJobsSettled()).toMatchObject([
      { method: 'GithubImporter.run', args: ['1'], state: 'completed', attemptsMade: 1, result: 'github 1' },
      { method: 'GitlabImporter.run', args: ['1'], state: 'completed', attemptsMade: 1, result: 'gitlab 1' },
    ]);
    expect(importerRuns.map((r) => [r.self, r.source])).toEqual([
      [github, 'github'],
      [gitlab, 'gitlab'],
    ]);
    // Under the method's own lock, after the hold: the job's token is newer than the hold's.
    expect(importerRuns.every((r) => r.fencingToken > other.fencingToken)).toBe(true);
    expect(testing.isLocked('import:1')).toBe(false);
  });

  it('an override that calls super: the job is named after the subclass and runs the locked base body once, not the override again', async () => {
    const { app, testing } = await start([AuditedSync]);
    const service = app.get(AuditedSync);
    expect(await service.sync('1')).toBe('synced');
    expect(calls).toEqual(['override 1', 'base 1']);

    calls.length = 0;
    const other = testing.hold('sync:2');
    const answer = (await service.sync('2')) as Deferred;
    expect(answer).toBeInstanceOf(Deferred);
    expect(answer.method).toBe('AuditedSync.sync');
    other.release();
    expect(await testing.deferredJobsSettled()).toMatchObject([{ method: 'AuditedSync.sync', state: 'completed', result: 'synced' }]);
    // The override ran in the call that deferred; the job runs the body that deferred (the base's), once.
    expect(calls).toEqual(['override 2', 'base 2']);
  });

  it('a deferring override of a deferring base method: each declaration has its job name, and the base class as a provider keeps its own', async () => {
    const { app, testing } = await start([Ledger, AuditedLedger]);
    const audited = app.get(AuditedLedger);
    const ledger = app.get(Ledger);

    const auditHold = testing.hold('audit:1');
    const outer = (await audited.post('1')) as Deferred; // the override's own key is busy
    const ledgerHold = testing.hold('ledger:2');
    const inner = (await audited.post('2')) as Deferred; // the override runs, and super's key is busy
    const plain = (await ledger.post('2')) as Deferred; // the base class's own provider, same busy key
    expect([outer.method, inner.method, plain.method]).toEqual(['AuditedLedger.post', 'AuditedLedger.post (Ledger.post)', 'Ledger.post']);
    expect(calls).toEqual(['audit 2']);

    auditHold.release();
    ledgerHold.release();
    expect((await testing.deferredJobsSettled()).map((j) => [j.method, j.state])).toEqual([
      ['AuditedLedger.post', 'completed'],
      ['AuditedLedger.post (Ledger.post)', 'completed'],
      ['Ledger.post', 'completed'],
    ]);
    expect(calls).toEqual(['audit 2', 'audit 1', 'ledger AuditedLedger 1', 'ledger AuditedLedger 2', 'ledger Ledger 2']);
  });

  it('a class declaring its own deferring method names its jobs as before', async () => {
    const { app, testing } = await start([Ledger]);
    testing.hold('ledger:1', { ttl: 50 });
    expect(((await app.get(Ledger).post('1')) as Deferred).method).toBe('Ledger.post');
    expect(await testing.deferredJobsSettled()).toMatchObject([{ method: 'Ledger.post', state: 'completed' }]);
  });

  it('two provider instances answering to one job name fail startup, saying why and what to do; an alias of one provider does not', async () => {
    const twoClassesNamedWorker = await startupError([workerClass(), workerClass()]);
    expect(twoClassesNamedWorker).toBeInstanceOf(DistributedLockError);
    expect(String(twoClassesNamedWorker)).toMatch(
      /@Locked on Worker\.run: two provider instances would defer jobs named Worker\.run: either two classes are named Worker, or one class is provided twice.*give the classes distinct names, or provide the class once/,
    );
    const oneClassTwice = await startupError([GithubImporter, { provide: 'second importer', useClass: GithubImporter }]);
    expect(String(oneClassTwice)).toMatch(/two provider instances would defer jobs named GithubImporter\.run/);

    const { app } = await start([GithubImporter, { provide: 'importer alias', useExisting: GithubImporter }]);
    expect(app.get('importer alias')).toBe(app.get(GithubImporter));
  });

  it("a job named by the declaring class (an earlier version's) runs on the one provider that inherits the method", async () => {
    const { app, testing } = await start([GithubImporter]);
    const github = app.get(GithubImporter);
    await enqueueAsEarlierVersion(app, github, '7');
    expect(await testing.deferredJobsSettled()).toMatchObject([{ method: 'Importer.run', state: 'completed', result: 'github 7' }]);
    expect(importerRuns.map((r) => [r.self, r.id])).toEqual([[github, '7']]);
  });

  it('a job named by the declaring class while several providers inherit the method fails with the reason, run on none of them', async () => {
    const { app, testing } = await start([GithubImporter, GitlabImporter], { defer: { attempts: 2, backoff: 10 } });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    await enqueueAsEarlierVersion(app, app.get(GithubImporter), '8');
    const [job] = await testing.deferredJobsSettled();
    expect(job).toMatchObject({ method: 'Importer.run', state: 'failed', attemptsMade: 2 });
    expect(job.failedReason).toMatch(
      /^DistributedLockError: Deferred job Importer\.run names the class that declares the method, as jobs enqueued by an earlier version of the library did, and 2 providers inherit it here \(GithubImporter\.run, GitlabImporter\.run\): which one deferred the call is unknown, so it is not run\./,
    );
    expect(importerRuns).toEqual([]);
    expect(errors.mock.calls.map(([m]) => String(m))).toEqual([expect.stringMatching(/Deferred Importer\.run \(job 1\) failed for good/)]);
  });
});
