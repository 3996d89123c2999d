import { luaScript, ScriptRunner } from '../../lib/redis/lua-script';
import type { RedisClient } from '../../lib/redis/redis-connection';

/** Which calls a ScriptRunner sends as EVAL (the script's text) and which by SHA1. */
describe('ScriptRunner: EVAL or EVALSHA', () => {
  const script = luaScript(1, 'return 1');
  function fakeClient() {
    const sent: string[] = [];
    const client = {
      stream: {} as object,
      eval: () => (sent.push('EVAL'), Promise.resolve(1)),
      evalsha: () => (sent.push('EVALSHA'), Promise.resolve(1)),
    };
    return { client, sent, runner: new ScriptRunner(client as unknown as RedisClient) };
  }

  it('the first call of a script on a connection goes as EVAL, later ones by SHA1', async () => {
    const { runner, sent } = fakeClient();
    await runner.run(script, ['k']);
    await runner.run(script, ['k']);
    expect(sent).toEqual(['EVAL', 'EVALSHA']);
  });

  it('a new connection (ioredis reconnected, often to a restarted server without its script cache) starts over with EVAL', async () => {
    const { client, runner, sent } = fakeClient();
    await runner.run(script, ['k']);
    client.stream = {}; // a new socket
    await runner.run(script, ['k']);
    await runner.run(script, ['k']);
    expect(sent).toEqual(['EVAL', 'EVAL', 'EVALSHA']);
  });

  it('forgetSent: every script’s next call goes as EVAL', async () => {
    const { runner, sent } = fakeClient();
    await runner.run(script, ['k']);
    runner.forgetSent();
    await runner.run(script, ['k']);
    expect(sent).toEqual(['EVAL', 'EVAL']);
  });

  it('pipelines on a client from another copy of ioredis go through its own evalsha, never our Command objects', async () => {
    const sent: string[] = [];
    const queue: Array<() => unknown> = [];
    const foreign = {
      stream: {},
      options: {},
      eval: () => Promise.resolve(1),
      evalsha: () => Promise.resolve(1),
      pipeline: () => ({
        eval: () => queue.push(() => 1),
        evalsha: () => (sent.push('its evalsha'), queue.push(() => 1)),
        sendCommand: () => (sent.push('our Command'), queue.push(() => 1)),
        exec: () => Promise.resolve(queue.splice(0).map((run) => [null, run()])),
      }),
    };
    const runner = new ScriptRunner(foreign as unknown as RedisClient);
    await runner.run(script, ['k']); // the script is cached: the pipeline goes by SHA1
    await runner.runPipelined(script, [['k'], ['k']], (exec) => exec());
    expect(sent).toEqual(['its evalsha', 'its evalsha']);
  });
});
