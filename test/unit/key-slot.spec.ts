import { CLUSTER_SLOTS, keySlot, slotTag } from '../../lib/redis/key-slot';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { redisKeySlot } from '../harness/redis-key-slot';

/**
 * The library's slot function (sharded wake channels, lib/redis/wake-route.ts) against the harness'
 * byte-for-byte copy of Redis' keyHashSlot, and the slot tags that name one channel per slot.
 */
describe('Cluster key slots', () => {
  it('agrees with Redis on lock names, braces, empty tags and non-ASCII text', () => {
    const keys = ['acct:1', '}x', '{}', 'a}b{c', '%7D', '', 'héllo', '日本', 'x{}y}z', '{{a}}'];
    for (const key of keys) {
      for (const name of [lockRedisKeys('lock:', key || '_').lock, key, `pre{${key}`, `{${key}}tail`]) {
        expect({ name, slot: keySlot(name) }).toEqual({ name, slot: redisKeySlot(name) });
      }
    }
  });

  it('has a tag of 1 to 3 plain characters for every slot, hashing to that slot inside a channel name', () => {
    const seen = new Set<string>();
    for (let slot = 0; slot < CLUSTER_SLOTS; slot++) {
      const tag = slotTag(slot);
      expect(tag).toMatch(/^[0-9A-Za-z_-]{1,3}$/);
      seen.add(tag);
      const channel = `lock:waiters:{${tag}}:service-1`;
      if (redisKeySlot(channel) !== slot || keySlot(channel) !== slot) throw new Error(`slot ${slot}: tag ${tag} hashes elsewhere`);
    }
    expect(seen.size).toBe(CLUSTER_SLOTS);
  });
});
