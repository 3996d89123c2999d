/**
 * A deferring `@Locked` method inherited from a base class, on a real Redis with real BullMQ: two providers
 * extending one base each have their jobs, named after their own class, run on an instance of that class; a
 * job an earlier version left in the queue (named by the declaring class) runs when one provider inherits the
 * method and fails when several do. In process, with every case: test/unit/testing-module-defer-inheritance.spec.ts.
 */
import { INestApplicationContext, Logger, Module, type Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../unit/core-helpers';
import { EARLIER_VERSION_JOB_NAME, GithubImporter, GitlabImporter, importerRuns } from '../shared/inherited-deferring-methods';

describe("@Locked onBusy 'defer' on an inherited method (BullMQ)", () => {
  let redis: RedisProcess;
  let apps: INestApplicationContext[] = [];
  let queue: Queue;
  let queueName = '';
  let testNo = 0;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(async () => {
    await redis.stop();
  });
  beforeEach(() => {
    importerRuns.length = 0;
    queueName = `defer-inheritance-${++testNo}`;
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(apps.map((a) => a.close()));
    apps = [];
    await queue.close();
  });

  /** One instance of the application: its own lock module and worker on the shared queue. */
  async function startApp(providers: Provider[]): Promise<INestApplicationContext> {
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'inherit:', defer: { queueName, attempts: 2, backoff: 50 } })],
      providers,
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = await moduleRef.init();
    apps.push(app);
    return app;
  }

  /** A job as a version that named jobs by the declaring class stored it, whichever provider deferred the call. */
  const addAsEarlierVersion = (id: string) =>
    queue.add(EARLIER_VERSION_JOB_NAME, { method: EARLIER_VERSION_JOB_NAME, args: [id], undefinedArgs: [] }, { attempts: 2, backoff: 50 });

  it("two providers extending one base, on two instances: each job is named after its provider's class and runs on an instance of it", async () => {
    const [a, b] = [await startApp([GithubImporter, GitlabImporter]), await startApp([GithubImporter, GitlabImporter])];
    const held = await a.get(LockService).acquire('import:1');
    const answers = (await Promise.all([
      a.get(GithubImporter).run('1'),
      b.get(GitlabImporter).run('1'),
      a.get(GitlabImporter).run('1'),
    ])) as Deferred[];
    expect(answers.map((d) => d.method)).toEqual(['GithubImporter.run', 'GitlabImporter.run', 'GitlabImporter.run']);
    await held.release();

    expect(await pollUntil(async () => (await queue.getJobCounts('completed')).completed === 3, 20_000, 25)).toBe(true);
    for (const { jobId, method } of answers) {
      const job = (await queue.getJob(jobId))!;
      expect([job.name, job.returnvalue]).toEqual([method, method === 'GithubImporter.run' ? 'github 1' : 'gitlab 1']);
    }
    expect((await queue.getJobCounts('failed')).failed).toBe(0);
    // Each run's `this` was the provider of the class its job names, on whichever instance's worker took it.
    expect(importerRuns.map((r) => `${r.self.constructor.name}: ${r.source}`).sort()).toEqual([
      'GithubImporter: github',
      'GitlabImporter: gitlab',
      'GitlabImporter: gitlab',
    ]);
    expect(importerRuns.every((r) => [a, b].some((app) => app.get(r.self.constructor) === r.self))).toBe(true);
    expect(importerRuns.every((r) => r.fencingToken > held.fencingToken)).toBe(true);
  });

  it('a job named by the declaring class, left by an earlier version: run on the one provider inheriting the method', async () => {
    const app = await startApp([GithubImporter]);
    const job = await addAsEarlierVersion('7');
    expect(await pollUntil(async () => (await queue.getJobState(job.id!)) === 'completed', 20_000, 25)).toBe(true);
    expect((await queue.getJob(job.id!))!.returnvalue).toBe('github 7');
    expect(importerRuns.map((r) => [r.self, r.id])).toEqual([[app.get(GithubImporter), '7']]);
  });

  it('a job named by the declaring class while two providers inherit the method: failed with the reason, run on neither', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    await startApp([GithubImporter, GitlabImporter]);
    const job = await addAsEarlierVersion('8');
    expect(await pollUntil(async () => (await queue.getJobState(job.id!)) === 'failed', 20_000, 25)).toBe(true);
    const failed = (await queue.getJob(job.id!))!;
    expect(failed.attemptsMade).toBe(2);
    expect(failed.failedReason).toMatch(
      /^DistributedLockError: Deferred job Importer\.run names the class that declares the method, .*2 providers inherit it here \(GithubImporter\.run, GitlabImporter\.run\): which one deferred the call is unknown, so it is not run\./,
    );
    expect(importerRuns).toEqual([]);
    expect(errors.mock.calls.map(([m]) => String(m))).toContainEqual(expect.stringMatching(/Deferred Importer\.run \(job .+\) failed for good/));
  });
});
