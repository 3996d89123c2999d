import { DistributedLockModuleOptions, LockService } from '../../../../lib';
import { killSurvivors } from '../../../harness/redis-process';
import { SentinelGroup } from '../../../harness/sentinel-group';
import { expectCleanClose, expectNothingLeft, startService, UnhandledRejections } from './fault-helpers';
import { SettleTracker } from './settle-tracker';
import { sleep } from './timing';

/** What a T6 case works with; `group` is the case's own master, replicas and Sentinels. */
export interface SentinelCase {
  group?: SentinelGroup;
  calls: SettleTracker;
  services: LockService[];
  /** A started LockService with the suite's options under `options`, closed (and checked) after the case. */
  makeService(options: DistributedLockModuleOptions): Promise<LockService>;
}

/**
 * The lifecycle of both T6 suites, registered on the calling `describe`: every case gets a fresh
 * call tracker and service list; afterwards every service closes cleanly, every tracked call has
 * settled, the Sentinel group is stopped, and the suite ends with no unhandled rejection and no
 * process left. `beforeClose` runs first after a case that started a group (e.g. thaw a frozen replica).
 */
export function sentinelSuite(defaults: Partial<DistributedLockModuleOptions>, beforeClose?: (group: SentinelGroup) => void): SentinelCase {
  const unhandled = new UnhandledRejections();
  const current: SentinelCase = {
    calls: new SettleTracker(),
    services: [],
    makeService: (options) => startService(current.services, { ...defaults, ...options }),
  };

  beforeAll(() => unhandled.start());

  beforeEach(() => {
    current.calls = new SettleTracker();
    current.services = [];
  });

  afterEach(async () => {
    if (current.group) beforeClose?.(current.group);
    await expectCleanClose(current.calls, current.services);
    expectNothingLeft(current.calls, unhandled);
    await current.group?.stop();
    current.group = undefined;
  });

  afterAll(async () => {
    await sleep(50);
    unhandled.stop();
    expect(unhandled.seen).toEqual([]);
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  return current;
}
