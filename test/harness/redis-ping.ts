import * as net from 'net';

/**
 * Raw-socket probes to decide "the server is up" without an ioredis client, whose reconnect timers
 * and offline queue would outlive a failed probe and muddle the answer.
 */

/**
 * Sends one inline command and resolves with the first complete reply (simple/error line, or a
 * whole bulk string), or undefined on refusal, reset or no answer within timeoutMs (a SIGSTOPped
 * server still accepts TCP connections in the kernel backlog, so "connected" proves nothing).
 */
function sendOnce(command: string, port: number, host: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let reply = '';
    let settled = false;
    const socket = net.connect({ port, host });
    const done = (value: string | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(value);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.setNoDelay(true);
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      const eol = reply.indexOf('\r\n');
      if (eol < 0) return;
      if (!reply.startsWith('$')) return done(reply.slice(0, eol));
      const len = Number(reply.slice(1, eol));
      if (len < 0) return done('');
      if (reply.length >= eol + 2 + len) done(reply.slice(eol + 2, eol + 2 + len));
    });
    socket.on('error', () => done(undefined));
    socket.on('close', () => done(undefined));
  });
}

/** One PING: true on +PONG; false on refusal, reset, an error reply (e.g. -LOADING) or silence. */
export async function pingOnce(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return (await sendOnce('PING', port, host, timeoutMs)) === '+PONG';
}

/** The process_id of whatever redis-server answers on host:port, or undefined if none answers. */
export async function serverPid(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<number | undefined> {
  const info = await sendOnce('INFO server', port, host, timeoutMs);
  const match = info && /^process_id:(\d+)\r?$/m.exec(info);
  return match ? Number(match[1]) : undefined;
}

/**
 * Polls until the server answers or `timeoutMs` passed; `abort` returning a reason stops early.
 * With `expectedPid`, only that process counts: a port picked as "free" can be taken by another
 * server meanwhile, which would otherwise answer for ours while ours is still failing to bind.
 */
export async function waitForPing(
  port: number,
  host: string,
  timeoutMs: number,
  abort?: () => string | undefined,
  expectedPid?: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let answeredBy: number | undefined;
  for (;;) {
    const reason = abort?.();
    if (reason) throw new Error(reason);
    const left = deadline - Date.now();
    if (left <= 0) {
      const other = answeredBy === undefined ? '' : ` (pid ${answeredBy} answers on that port, not ${expectedPid})`;
      throw new Error(`no PONG from ${host}:${port} within ${timeoutMs} ms${other}`);
    }
    if (expectedPid === undefined) {
      if (await pingOnce(port, host, Math.min(500, left))) return;
    } else {
      answeredBy = await serverPid(port, host, Math.min(500, left));
      if (answeredBy === expectedPid) return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
